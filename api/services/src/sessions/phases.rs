//! The time the last launches spent in their phases. Nothing here reaches the application
//! state.
use uuid::Uuid;

/// How long the last launches spent in the engine's own create+start (inside PREPARING), for
/// `bai bench` and the metrics (SSH setup, after RUNNING, has its own histogram phase).
#[derive(Default)]
pub struct LaunchPhases {
    last: parking_lot::Mutex<std::collections::VecDeque<(Uuid, std::time::Duration)>>,
}

impl LaunchPhases {
    pub(crate) fn record(&self, session: Uuid, engine: std::time::Duration) {
        metrics::histogram!("bai_launch_phase_seconds", "phase" => "engine")
            .record(engine.as_secs_f64());
        let mut last = self.last.lock();
        if last.len() >= 64 {
            last.pop_front();
        }
        last.push_back((session, engine));
    }

    /// The engine's create+start of `session`'s launch, if it is among the last 64.
    pub fn of(&self, session: Uuid) -> Option<std::time::Duration> {
        let last = self.last.lock();
        last.iter()
            .rev()
            .find(|(id, _)| *id == session)
            .map(|(_, e)| *e)
    }
}
