//! What a chart needs, collected during the run in bounded memory: counts per time bucket, whose
//! width doubles (merging neighbours) whenever the run outgrows [`MAX_BUCKETS`], plus up to
//! [`MAX_MARKERS`] open and close times.

/// Buckets kept while running; a chart re-aggregates them to a few hundred bars.
pub const MAX_BUCKETS: usize = 4096;
/// Open/close markers kept (later ones are only counted in the buckets).
pub const MAX_MARKERS: usize = 2000;

/// Breaker state rows of the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// Closed (or disabled).
    Closed = 0,
    /// Half-open.
    HalfOpen = 1,
    /// Open (or forced open).
    Open = 2,
}

/// How an upstream request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 1xx-3xx.
    Success,
    /// Reachable, not a success (a 404).
    Answer,
    /// Transient failure.
    Failure,
    /// Rate-limited (retry later).
    RateLimited,
    /// The caller gave up waiting.
    Timeout,
}

/// One bucket's counts.
#[derive(Debug, Clone, Default)]
pub struct Bucket {
    /// Requests by [`Class`].
    pub requests: [u64; 5],
    /// Calls the breaker refused.
    pub refused: u64,
    /// Calls that gave up.
    pub gave_up: u64,
    /// Retries scheduled (waits started).
    pub waits: u64,
    /// Probes admitted.
    pub probes: u64,
    /// Nanoseconds spent in each [`Row`].
    pub state_ns: [u64; 3],
    /// Rows entered in this bucket (bit per row), so a state held for no time still shows.
    pub entered: u8,
}

impl Bucket {
    /// Adds `o`'s counts and times to this bucket's (when buckets are coarsened or joined into
    /// one bar).
    pub fn merge(&mut self, o: &Bucket) {
        for i in 0..5 {
            self.requests[i] += o.requests[i];
        }
        self.refused += o.refused;
        self.gave_up += o.gave_up;
        self.waits += o.waits;
        self.probes += o.probes;
        for i in 0..3 {
            self.state_ns[i] += o.state_ns[i];
        }
        self.entered |= o.entered;
    }

    /// Upstream requests in total.
    pub fn total_requests(&self) -> u64 {
        self.requests.iter().sum()
    }

    /// Whether to show `row` for this bucket: the breaker spent at least a tenth of the
    /// bucket's time there, or, for closed, closed at all (a close that lasts a few seconds is
    /// exactly what a reader must see). The instant of half-open while a probe is answered at
    /// once is shown by the probe ticks instead.
    pub fn shows(&self, row: Row) -> bool {
        let total: u64 = self.state_ns.iter().sum();
        let share = self.state_ns[row as usize];
        (total > 0 && share * 10 >= total) || (row == Row::Closed && self.entered & 1 != 0)
    }
}

/// The collected series.
#[derive(Debug, Clone)]
pub struct Collector {
    /// Bucket width, ns.
    pub width: u64,
    /// Buckets from time 0.
    pub buckets: Vec<Bucket>,
    /// Times the breaker opened from closed, ns.
    pub opens: Vec<u64>,
    /// Times it closed, ns.
    pub closes: Vec<u64>,
    /// Whether a breaker was configured (the state row means something).
    pub has_breaker: bool,
    row: Row,
    row_since: u64,
    /// End of the run, ns.
    pub end: u64,
}

impl Collector {
    /// An empty collector starting with one-second buckets.
    pub fn new(has_breaker: bool) -> Self {
        Collector {
            width: 1_000_000_000,
            buckets: Vec::new(),
            opens: Vec::new(),
            closes: Vec::new(),
            has_breaker,
            row: Row::Closed,
            row_since: 0,
            end: 0,
        }
    }

    fn bucket(&mut self, t: u64) -> &mut Bucket {
        let mut i = (t / self.width) as usize;
        while i >= MAX_BUCKETS {
            self.coarsen();
            i = (t / self.width) as usize;
        }
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, Bucket::default());
        }
        &mut self.buckets[i]
    }

    fn coarsen(&mut self) {
        let old = std::mem::take(&mut self.buckets);
        let mut merged = Vec::with_capacity(old.len() / 2 + 1);
        for pair in old.chunks(2) {
            let mut b = pair[0].clone();
            if let Some(o) = pair.get(1) {
                b.merge(o);
            }
            merged.push(b);
        }
        self.buckets = merged;
        self.width = self.width.saturating_mul(2);
    }

    /// An upstream request that ended as `class` (counted at its start).
    #[inline]
    pub fn request(&mut self, t: u64, class: Class) {
        self.bucket(t).requests[class as usize] += 1;
    }

    /// A refusal.
    #[inline]
    pub fn refused(&mut self, t: u64) {
        self.bucket(t).refused += 1;
    }

    /// A give-up.
    pub fn gave_up(&mut self, t: u64) {
        self.bucket(t).gave_up += 1;
    }

    /// A retry scheduled.
    pub fn wait(&mut self, t: u64) {
        self.bucket(t).waits += 1;
    }

    /// A probe admitted.
    pub fn probe(&mut self, t: u64) {
        self.bucket(t).probes += 1;
    }

    fn spend_state(&mut self, until: u64) {
        let row = self.row as usize;
        let mut t = self.row_since;
        while t < until {
            let w = self.width;
            let b_end = (t / w).saturating_add(1).saturating_mul(w).min(until);
            self.bucket(t).state_ns[row] += b_end - t;
            t = b_end;
        }
        self.row_since = until;
    }

    /// The breaker entered `row` at `t`.
    pub fn state(&mut self, t: u64, row: Row, opened: bool, closed: bool) {
        self.spend_state(t);
        self.row = row;
        self.bucket(t).entered |= 1 << row as u8;
        if opened && self.opens.len() < MAX_MARKERS {
            self.opens.push(t);
        }
        if closed && self.closes.len() < MAX_MARKERS {
            self.closes.push(t);
        }
    }

    /// Ends the run at `t`.
    pub fn finish(&mut self, t: u64) {
        self.spend_state(t);
        self.end = t;
        self.bucket(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarsens_and_keeps_totals() {
        let mut c = Collector::new(true);
        for s in 0..10_000u64 {
            c.request(s * 1_000_000_000, Class::Success);
        }
        assert!(c.buckets.len() <= MAX_BUCKETS);
        assert_eq!(c.width, 4_000_000_000);
        let total: u64 = c.buckets.iter().map(Bucket::total_requests).sum();
        assert_eq!(total, 10_000);
    }

    #[test]
    fn time_in_state_is_spread_over_buckets() {
        let mut c = Collector::new(true);
        c.state(500_000_000, Row::Open, true, false);
        c.finish(2_500_000_000);
        assert_eq!(c.buckets[0].state_ns, [500_000_000, 0, 500_000_000]);
        assert_eq!(c.buckets[1].state_ns[2], 1_000_000_000);
        assert_eq!(c.buckets[2].state_ns[2], 500_000_000);
        assert_eq!(c.opens, vec![500_000_000]);
        assert!(c.buckets[0].shows(Row::Open) && c.buckets[0].shows(Row::Closed));
        assert!(!c.buckets[1].shows(Row::Closed));
    }
}
