//! The `holdoff` binary: parses arguments and prints errors as one line, exit code 2.

use std::process::ExitCode;

fn main() -> ExitCode {
    // A bug must still end in one line, never a Rust backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        eprintln!(
            "error: internal error (please report): {}",
            holdoff_cli::error::one_line(&msg)
        );
    }));
    match std::panic::catch_unwind(holdoff_cli::cli::main) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(_) => ExitCode::from(70),
    }
}
