//! Status codes, the panic boundary and the thread-local last-error detail.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use hcore::interop::ErrorKind;
use hcore::{ClockError, ConfigError, HoldoffError, InputError, PermitError};

use crate::types::core_name;

/// What a `holdoff_*` function did. Every fallible function returns one.
///
/// The numbers are stable and never reused. `HOLDOFF_STATUS_OK` and
/// `HOLDOFF_STATUS_BREAKER_OPEN` are not errors; every other code is, and leaves the function's
/// out-parameters untouched. After an error, `holdoff_last_error_message()` and
/// `holdoff_last_error_field()` give the detail on the calling thread.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_status {
    /// Success.
    Ok = 0,
    /// Not an error: the breaker refused the call (open, half-open with no probe due, or forced
    /// open). The refusal out-parameter, if given, says for how long.
    BreakerOpen = 1,
    /// A required pointer argument was NULL. The last-error field names the parameter.
    NullParameter = 100,
    /// A handle was already freed or is of another type (detected in debug builds of the
    /// library only; release builds do not check and the call is undefined behaviour).
    InvalidHandle = 101,
    /// A `holdoff_execution_options.struct_size` does not match this library: the header and
    /// the library are from different versions. Initialise it with
    /// `holdoff_execution_options_init`.
    AbiMismatch = 102,
    /// A configuration value breaks a rule. The last-error field names it (as the conformance
    /// suite spells it, e.g. `breaker.open_interval.multiplier`); the message states the rule.
    /// Stable name `invalid_config`.
    InvalidConfig = 200,
    /// An argument of an operation is out of range: a value that is not an HTTP status at all
    /// (outside 0..=999; the last-error field is `status`), an enum value this library does not
    /// know, text that is not UTF-8, an index past the end of a key list or a metric list, a
    /// metric code out of range, a system clock set by hand, a quota lease that was not
    /// acquired. Stable name `invalid_input`.
    InvalidInput = 201,
    /// A manual clock was set earlier than it shows. Stable name `clock_backwards`.
    ClockBackwards = 202,
    /// The permit (or quota lease) was already recorded. Stable name `permit_already_recorded`.
    PermitAlreadyRecorded = 203,
    /// The permit was issued by another breaker (or the quota lease by another quota). It stays
    /// usable on its own. Stable name `foreign_permit`.
    ForeignPermit = 204,
    /// A bug in holdoff: a Rust panic was caught at the boundary. The message has its text.
    Panic = 900,
    /// Reserved: a lock poisoned by an earlier panic. holdoff recovers poisoned locks (their
    /// state is always consistent), so no function returns this today.
    Poisoned = 901,
}

impl holdoff_status {
    pub(crate) fn message(self) -> &'static CStr {
        match self {
            holdoff_status::Ok => c"ok",
            holdoff_status::BreakerOpen => c"the breaker is open: the call was not admitted",
            holdoff_status::NullParameter => c"a required pointer argument was NULL",
            holdoff_status::InvalidHandle => c"the handle was freed or is of another type",
            holdoff_status::AbiMismatch => {
                c"struct_size does not match the library: header and library versions differ"
            }
            holdoff_status::InvalidConfig => c"invalid configuration",
            holdoff_status::InvalidInput => c"invalid input",
            holdoff_status::ClockBackwards => c"a monotonic clock cannot go backwards",
            holdoff_status::PermitAlreadyRecorded => c"this permit was already recorded",
            holdoff_status::ForeignPermit => c"this permit was issued by another breaker or quota",
            holdoff_status::Panic => c"internal error: a panic was caught at the FFI boundary",
            holdoff_status::Poisoned => c"internal error: a lock was poisoned",
        }
    }

    /// The name of a status that is the C ABI's own; `None` for the core's errors, whose names
    /// come from the core's `ErrorKind` table.
    fn abi_name(self) -> Option<&'static CStr> {
        match self {
            holdoff_status::Ok => Some(c"ok"),
            holdoff_status::BreakerOpen => Some(c"breaker_open"),
            holdoff_status::NullParameter => Some(c"null_parameter"),
            holdoff_status::InvalidHandle => Some(c"invalid_handle"),
            holdoff_status::AbiMismatch => Some(c"abi_mismatch"),
            holdoff_status::Panic => Some(c"panic"),
            holdoff_status::Poisoned => Some(c"poisoned"),
            holdoff_status::InvalidConfig
            | holdoff_status::InvalidInput
            | holdoff_status::ClockBackwards
            | holdoff_status::PermitAlreadyRecorded
            | holdoff_status::ForeignPermit => None,
        }
    }

    pub(crate) fn from_u32(v: u32) -> Option<holdoff_status> {
        use holdoff_status::*;
        [
            Ok,
            BreakerOpen,
            NullParameter,
            InvalidHandle,
            AbiMismatch,
            InvalidConfig,
            InvalidInput,
            ClockBackwards,
            PermitAlreadyRecorded,
            ForeignPermit,
            Panic,
            Poisoned,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }
}

/// An error on its way out of the library: the status plus the detail kept for
/// `holdoff_last_error_*`.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) status: holdoff_status,
    pub(crate) field: String,
    pub(crate) message: String,
}

impl Fail {
    pub(crate) fn new(status: holdoff_status, field: &str, message: impl Into<String>) -> Fail {
        Fail {
            status,
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn null(param: &str) -> Fail {
        Fail::new(
            holdoff_status::NullParameter,
            param,
            format!("{param} must not be NULL"),
        )
    }

    pub(crate) fn input(field: &str, rule: impl Into<String>) -> Fail {
        let rule = rule.into();
        Fail::new(
            holdoff_status::InvalidInput,
            field,
            format!("invalid input: {field}: {rule}"),
        )
    }
}

impl From<ConfigError> for Fail {
    fn from(e: ConfigError) -> Fail {
        Fail::new(holdoff_status::InvalidConfig, &e.field.clone(), e.to_string())
    }
}

impl From<InputError> for Fail {
    fn from(e: InputError) -> Fail {
        Fail::new(holdoff_status::InvalidInput, &e.field.clone(), e.to_string())
    }
}

impl From<ClockError> for Fail {
    fn from(e: ClockError) -> Fail {
        Fail::new(holdoff_status::ClockBackwards, "", e.to_string())
    }
}

impl From<PermitError> for Fail {
    fn from(e: PermitError) -> Fail {
        let status = match e {
            PermitError::Foreign => holdoff_status::ForeignPermit,
            PermitError::AlreadyRecorded => holdoff_status::PermitAlreadyRecorded,
        };
        Fail::new(status, "permit", e.to_string())
    }
}

impl From<HoldoffError> for Fail {
    fn from(e: HoldoffError) -> Fail {
        match e {
            HoldoffError::Config(e) => e.into(),
            HoldoffError::Input(e) => e.into(),
            HoldoffError::Clock(e) => e.into(),
            HoldoffError::Permit(e) => e.into(),
        }
    }
}

pub(crate) type Res = Result<holdoff_status, Fail>;

struct LastError {
    field: CString,
    message: CString,
}

thread_local! {
    static LAST: RefCell<LastError> = RefCell::new(LastError {
        field: CString::default(),
        message: CString::default(),
    });
}

fn c_string(s: String) -> CString {
    // Interior NULs cannot come from holdoff's own text; user text (a key) could carry one.
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

fn set_last(field: String, message: String) {
    LAST.with(|l| {
        let mut l = l.borrow_mut();
        l.field = c_string(field);
        l.message = c_string(message);
    });
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

/// Runs an exported function's body: a returned [`Fail`] becomes its status plus the
/// thread-local detail, and a panic becomes `HOLDOFF_STATUS_PANIC` instead of unwinding into C
/// (which would abort the process). A closure rather than a block macro, so rustfmt formats
/// every body.
pub(crate) fn boundary<F: FnOnce() -> Res>(f: F) -> holdoff_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(status)) => status,
        Ok(Err(fail)) => {
            set_last(fail.field, fail.message);
            fail.status
        }
        Err(payload) => {
            set_last(String::new(), format!("panic: {}", panic_text(&*payload)));
            holdoff_status::Panic
        }
    }
}

/// The static description of a status code. Never NULL: unknown codes give
/// `"unknown status"`. The string is static; do not free it.
#[no_mangle]
pub extern "C" fn holdoff_status_message(status: u32) -> *const c_char {
    holdoff_status::from_u32(status)
        .map_or(c"unknown status", holdoff_status::message)
        .as_ptr()
}

/// The stable name of a status code, as the conformance suite spells errors
/// (`invalid_config`, `invalid_input`, `clock_backwards`, `permit_already_recorded`,
/// `foreign_permit`; also `ok`, `breaker_open`, `null_parameter`, ...). NULL for an unknown
/// code. The string is static.
#[no_mangle]
pub extern "C" fn holdoff_status_name(status: u32) -> *const c_char {
    static CORE: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    let core = core_name::<ErrorKind>(&CORE, status);
    if !core.is_null() {
        return core;
    }
    holdoff_status::from_u32(status)
        .and_then(holdoff_status::abi_name)
        .map_or(std::ptr::null(), CStr::as_ptr)
}

/// The message of the last error returned **on the calling thread**, with its dynamic
/// detail (the rule a configuration value broke, the text of a caught panic). Empty before
/// any error. The pointer stays valid until the next failing `holdoff_*` call on this thread;
/// copy the text if you need it longer. Successful calls do not clear it (like `errno`), so
/// read it only right after a call returned an error.
#[no_mangle]
pub extern "C" fn holdoff_last_error_message() -> *const c_char {
    LAST.with(|l| l.borrow().message.as_ptr())
}

/// The field or parameter of the last error on the calling thread: for
/// `HOLDOFF_STATUS_INVALID_CONFIG` the configuration field as the conformance suite names it
/// (`budget.retry_after_cap`), for `HOLDOFF_STATUS_NULL_PARAMETER` the parameter's name,
/// for `HOLDOFF_STATUS_INVALID_INPUT` the argument. Empty when there is none. Same lifetime
/// rules as `holdoff_last_error_message`.
#[no_mangle]
pub extern "C" fn holdoff_last_error_field() -> *const c_char {
    LAST.with(|l| l.borrow().field.as_ptr())
}

/// Makes the library panic inside its boundary and return `HOLDOFF_STATUS_PANIC`: lets a
/// binding's tests check that a panic turns into a status and never crosses into the caller.
/// No other effect.
#[no_mangle]
pub extern "C" fn holdoff_debug_panic() -> holdoff_status {
    // `resume_unwind` unwinds like a panic without running the panic hook, so tests stay quiet.
    boundary(|| std::panic::resume_unwind(Box::new("holdoff_debug_panic was called")))
}
