//! The scheduler settings a model's session or encoder takes from its
//! caller; the rest (pipeline copies, buffer types) it decides itself.

use gantry_engine::sched::SchedulerParams;

/// Scheduler switches for a [`super::decoder::Session`] or a
/// [`super::bert::Encoder`]. The default ignores the environment; a program
/// that wants the environment switches calls [`SchedulerOptions::from_env`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerOptions {
    /// Let each backend reorder and fuse its splits
    /// ([`SchedulerParams::graph_optimize`]). On by default.
    pub graph_optimize: bool,
    /// Describe each new placement in words ([`SchedulerParams::debug`]): 0
    /// off (the default), 1 every split, 2 every node too.
    pub debug: u8,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        let params = SchedulerParams::default();
        Self { graph_optimize: params.graph_optimize, debug: params.debug }
    }
}

impl SchedulerOptions {
    /// The switches [`SchedulerParams::from_env`] reads: `GANTRY_NO_FUSION`
    /// (anything but empty or `0` turns fusion off) and `GANTRY_SCHED_DEBUG`
    /// (`1` or `2`).
    pub fn from_env() -> Self {
        let params = SchedulerParams::from_env();
        Self { graph_optimize: params.graph_optimize, debug: params.debug }
    }

    /// `params` with these switches.
    pub fn apply(self, params: SchedulerParams) -> SchedulerParams {
        SchedulerParams { graph_optimize: self.graph_optimize, debug: self.debug, ..params }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_schedulers_and_apply_sets_both_switches() {
        let options = SchedulerOptions::default();
        assert!(options.graph_optimize);
        assert_eq!(options.debug, 0);
        let off = SchedulerOptions { graph_optimize: false, debug: 2 };
        let params = off.apply(SchedulerParams { n_copies: 3, ..SchedulerParams::default() });
        assert!(!params.graph_optimize);
        assert_eq!((params.debug, params.n_copies), (2, 3));
    }
}
