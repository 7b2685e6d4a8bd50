//! The calibration beside a topology file (`rag.yaml` →
//! `rag.calibration.json`, written by `glassbox calibrate`): found, read,
//! and turned into the prices a pipeline bills with, with what makes it
//! doubtful (age, another machine, another topology version) told to the
//! caller as warnings. A calibration that cannot be read is a warning too:
//! the topology's own prices apply.

use std::collections::BTreeMap;
use std::path::Path;

use glassbox_engine::calibration::{self, Calibration};
use glassbox_topology::{Prices, Topology};

/// The calibration beside `topology_file`, if one is there and readable;
/// `warn` hears why one that is there cannot be used.
pub fn beside(topology_file: &Path, warn: &mut dyn FnMut(String)) -> Option<Calibration> {
    match Calibration::find(topology_file)? {
        Ok(c) => Some(c),
        Err(e) => {
            warn(format!("{e}; billing with the topology's prices"));
            None
        }
    }
}

/// The prices `calibration` sets for `topology` (none without one); `warn`
/// hears what makes it doubtful for a run today on this machine.
pub fn prices(
    calibration: Option<&Calibration>,
    topology: &Topology,
    warn: &mut dyn FnMut(String),
) -> BTreeMap<String, Prices> {
    let Some(c) = calibration else {
        return BTreeMap::new();
    };
    let today = calibration::today_days();
    let machine = calibration::this_machine();
    for w in c.warnings(today, &machine, &topology.version, &BTreeMap::new()) {
        warn(w);
    }
    c.prices()
}
