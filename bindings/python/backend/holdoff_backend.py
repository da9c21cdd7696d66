"""The PEP 517 build backend of holdoff's Python package: maturin, once Rust is known to be there.

Building holdoff from source compiles its Rust core, so it needs cargo on PATH. Without it,
maturin's own backend would download a Rust toolchain into the user's cache by itself. This
backend stops at the first hook instead, in seconds and without any download, with a message
saying what to install. maturin is asked for as a build requirement only when cargo is there,
and then every hook is maturin's own (``MATURIN_NO_INSTALL_RUST`` set, so it never fetches a
toolchain either).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

MATURIN = "maturin>=1.9.4,<2"
RUST_VERSION = "1.85"  # pyo3's minimum, bindings/python/Cargo.toml

MISSING = f"""
holdoff: building from source compiles a Rust extension, and {{problem}}.
Either
  - install a prebuilt wheel instead (Linux x86_64 and aarch64, CPython 3.9+):
        pip install --only-binary holdoff holdoff
    (from an index or a --find-links folder that holds the holdoff wheels), or
  - install Rust {RUST_VERSION} or newer (cargo and rustc on PATH), from the system's packages
    or https://rustup.rs, then run the same pip command again.
Nothing was downloaded: this build never installs a toolchain by itself.
"""


def _require_cargo() -> None:
    cargo = shutil.which("cargo")
    if cargo is None:
        problem = "cargo (Rust's build tool) is not on PATH"
    else:
        try:
            out = subprocess.run(
                [cargo, "--version"], capture_output=True, text=True, timeout=60, check=False
            )
            problem = ""
            if out.returncode != 0 or not out.stdout.startswith("cargo "):
                problem = f"`{cargo} --version` failed: {(out.stderr or out.stdout).strip()}"
        except (OSError, subprocess.TimeoutExpired) as e:
            problem = f"`{cargo} --version` failed: {e}"
    if problem:
        sys.stderr.write(MISSING.format(problem=problem))
        sys.stderr.flush()
        raise SystemExit(1)
    os.environ["MATURIN_NO_INSTALL_RUST"] = "1"


def _maturin() -> Any:
    _require_cargo()
    import maturin

    return maturin


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    _require_cargo()
    return [MATURIN]


def get_requires_for_build_editable(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    _require_cargo()
    return [MATURIN]


def get_requires_for_build_sdist(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    _require_cargo()
    return [MATURIN]


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Mapping[str, Any] | None = None
) -> str:
    return str(_maturin().prepare_metadata_for_build_wheel(metadata_directory, config_settings))


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Mapping[str, Any] | None = None
) -> str:
    return str(_maturin().prepare_metadata_for_build_editable(metadata_directory, config_settings))


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return str(_maturin().build_wheel(wheel_directory, config_settings, metadata_directory))


def build_editable(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return str(_maturin().build_editable(wheel_directory, config_settings, metadata_directory))


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    return str(_maturin().build_sdist(sdist_directory, config_settings))
