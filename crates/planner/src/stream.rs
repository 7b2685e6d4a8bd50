//! The bandwidth a device's memory streams in practice, where a published
//! measurement says it falls further below the datasheet than on the
//! devices the efficiency factors were fitted on.
//!
//! The decode factor `η_d` is fitted on NVIDIA devices, so it already holds
//! NVIDIA's gap between datasheet and streamed bandwidth. Azure's AI
//! benchmarking guide ran the same streaming kernels (BabelStream's copy,
//! mul, add and triad) on its ND MI300X v5 and ND H100 v5 nodes
//! (`Azure_Results/ND_MI300X_v5_results.md` and `ND_H100_v5_results.md`,
//! "HBM Bandwidth"): the MI300X streams 4.09–4.26 of its 5.3 TB/s (mean
//! 4.15, 78%), the H100 SXM 2.90–2.97 of its 3.35 TB/s (mean 2.935, 88%).
//! A device with such a figure ([`Hardware::stream_gbps`]) is planned at
//! `datasheet × (its streamed share / the H100's)`, never above its
//! datasheet: the MI300X at 0.89 of 5.3 TB/s. Devices without a figure keep
//! their datasheet bandwidth. Triad alone gives 0.87, copy alone 0.90.

use crate::explain::num;
use crate::hardware::Hardware;

/// The share of its datasheet bandwidth the H100 SXM streams in the same
/// test (mean of copy, mul, add and triad, 2.935 of 3.35 TB/s): the share
/// the fitted decode efficiencies already hold.
pub const FITTED_STREAM_SHARE: f64 = 2935.0 / 3350.0;

/// What `hw`'s memory reads at before software efficiency, GB/s.
pub fn read_gbps(hw: &Hardware) -> f64 {
    hw.bandwidth_gbps * read_share(hw)
}

/// `read_gbps / bandwidth_gbps`: 1 for a device without a streamed figure.
pub fn read_share(hw: &Hardware) -> f64 {
    match hw.stream_gbps {
        Some(s) => (s / hw.bandwidth_gbps / FITTED_STREAM_SHARE).min(1.0),
        None => 1.0,
    }
}

/// One line on the bandwidth `hw` is planned at, where it is not its
/// datasheet's.
pub fn note(hw: &Hardware) -> Option<String> {
    let share = read_share(hw);
    let streamed = hw.stream_gbps?;
    (share < 1.0).then(|| {
        format!(
            "{} streams {} of {} GB/s ({:.0}%) where the devices the efficiencies were fitted on stream {:.0}% (H100 SXM, same test): memory-bound terms use {} GB/s ({:.2} of the datasheet)",
            hw.id,
            num(streamed),
            num(hw.bandwidth_gbps),
            100.0 * streamed / hw.bandwidth_gbps,
            100.0 * FITTED_STREAM_SHARE,
            num(read_gbps(hw)),
            share
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::HardwareCatalogue;

    #[test]
    fn a_device_streaming_less_of_its_datasheet_than_the_h100_reads_slower() {
        let c = HardwareCatalogue::builtin().unwrap();
        let mi300x = c.get("mi300x").unwrap();
        // 4,150 of 5,300 GB/s against the H100's 2,935 of 3,350.
        let share = read_share(mi300x);
        assert!((share - 4150.0 / 5300.0 / (2935.0 / 3350.0)).abs() < 1e-12);
        assert!((0.88..0.90).contains(&share), "{share}");
        assert!(
            note(mi300x)
                .unwrap()
                .contains("memory-bound terms use 4737 GB/s")
        );
        // The reference device reads at its datasheet; so does one without
        // a figure.
        let h100 = c.get("h100-sxm").unwrap();
        assert_eq!(h100.stream_gbps, Some(2935.0));
        assert!((read_gbps(h100) - 3350.0).abs() < 1e-9);
        assert!(note(h100).is_none());
        let a100 = c.get("a100-sxm-80gb").unwrap();
        assert_eq!(read_gbps(a100), a100.bandwidth_gbps);
        assert!(note(a100).is_none());
    }

    #[test]
    fn a_streamed_figure_above_the_reference_share_never_raises_the_datasheet() {
        let mut hw = HardwareCatalogue::builtin()
            .unwrap()
            .get("l40s")
            .unwrap()
            .clone();
        hw.stream_gbps = Some(hw.bandwidth_gbps * 0.99);
        assert_eq!(read_gbps(&hw), hw.bandwidth_gbps);
    }
}
