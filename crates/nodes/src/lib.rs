//! glassbox-nodes
