//! glassbox-engine
