//! glassbox-planner
