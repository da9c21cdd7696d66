//! Native memory shown to JavaScript in place, as an external `ArrayBuffer`: the breaker's
//! fast-path word, a budget's out buffer and its episode flag. A copy would go stale, so where
//! the runtime refuses external buffers the caller gets `None` and keeps to native calls.

use napi::bindgen_prelude::*;
use napi::sys;

/// `len` bytes at `data` as an external `ArrayBuffer`. `keep` owns what holds them (an `Arc`) and
/// is dropped by the buffer's finalizer, so they outlive every JavaScript view; `None` (and
/// `keep` dropped at once) when the runtime refuses external buffers.
///
/// # Safety
/// `data` must point at `len` bytes that stay valid while `keep` lives, and JavaScript may read
/// (never write) them at any time until the finalizer runs.
pub(crate) unsafe fn view<'e, K: 'static>(
    env: &'e Env,
    data: *mut std::ffi::c_void,
    len: usize,
    keep: K,
) -> Result<Option<Unknown<'e>>> {
    let keep = Box::into_raw(Box::new(keep));
    let mut value = std::ptr::null_mut();
    // SAFETY: the caller's contract for `data`; `keep` is released once, by `release::<K>`.
    let status = unsafe {
        sys::napi_create_external_arraybuffer(
            env.raw(),
            data,
            len,
            Some(release::<K>),
            keep.cast(),
            &mut value,
        )
    };
    if status != sys::Status::napi_ok {
        // SAFETY: the finalizer was not registered, so `keep` is still ours.
        drop(unsafe { Box::from_raw(keep) });
        return Ok(None);
    }
    // SAFETY: a value napi just created in this env.
    Ok(Some(unsafe { Unknown::from_raw_unchecked(env.raw(), value) }))
}

/// The finalizer of a buffer `view` made: drops its `keep`.
unsafe extern "C" fn release<K>(
    _env: sys::napi_env,
    _data: *mut std::ffi::c_void,
    hint: *mut std::ffi::c_void,
) {
    // SAFETY: `hint` is the box `view` leaked for this buffer, freed once here.
    drop(unsafe { Box::from_raw(hint.cast::<K>()) });
}
