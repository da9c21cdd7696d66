//! A runner's report: one line per sub-test, then the total (`conformance/run-all` reads both).

use crate::R;

/// Counts the sub-tests as they end.
#[derive(Debug, Default)]
pub struct Tally {
    passed: u32,
    failed: u32,
}

impl Tally {
    /// Prints `ok   LABEL` or `FAIL LABEL: why` and counts it.
    pub fn note(&mut self, label: &str, result: R<()>) {
        match result {
            Ok(()) => {
                self.passed += 1;
                println!("ok   {label}");
            }
            Err(e) => {
                self.failed += 1;
                println!("FAIL {label}: {e}");
            }
        }
    }

    /// Prints `N passed, N failed, 0 skipped` (a runner skips nothing) and exits non-zero if a
    /// sub-test failed or none passed.
    pub fn finish(self) {
        println!("{} passed, {} failed, 0 skipped", self.passed, self.failed);
        if self.failed > 0 || self.passed == 0 {
            std::process::exit(1);
        }
    }
}
