"""kcl-lib's ``ExecProgram`` without its leak: every call's result is freed.

kcl-lib's Python binding (``kcl_lib.call_with_plugin_agent``, kcl's ``crates/api/src/lib.rs``)
copies the buffer the library's C API ``kcl_service_call_with_length`` returns and never frees
it, nor the service it creates for the call: a process keeps every result it has read (the
InferenceCluster step's is 262 KiB, its JSON and YAML output). Here the same exported C API of
the same loaded library is called through ctypes and the buffer is freed with
``kcl_service_free_string``; the reply's bytes are those kcl-lib's ``API.call`` reads, so the
results and error messages are the same.

The C signatures are those of kcl-lib ``KCL_LIB_VERSION`` (kcl's ``crates/api/src/service/
capi.rs``). Another installed version goes through kcl-lib's own binding (same results, the
leak again) until they are checked and ``KCL_LIB_VERSION`` is moved; a test fails meanwhile.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import threading
from typing import Any

__all__ = ["KCL_LIB_VERSION", "KCLError", "exec_program", "native"]

KCL_LIB_VERSION = "0.13.2"
# What the library puts before an error's text (capi.rs); kcl-lib's API.call strips it.
_ERROR_PREFIX = b"ERROR:"


class KCLError(Exception):
    """An error reply of kcl-lib; its text is what kcl-lib's ``API.call`` raises."""


class _Native:
    """The library's C API, called as kcl-lib's binding calls it, freeing what it returns."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)  # the already loaded extension: dlopen returns its handle
        self._new = lib.kcl_service_new
        self._new.argtypes, self._new.restype = [ctypes.c_uint64], ctypes.c_void_p
        self._delete = lib.kcl_service_delete
        self._delete.argtypes, self._delete.restype = [ctypes.c_void_p], None
        self._free = lib.kcl_service_free_string
        self._free.argtypes, self._free.restype = [ctypes.c_void_p], None
        self._call = lib.kcl_service_call_with_length
        self._call.argtypes = [
            ctypes.c_void_p,  # serv
            ctypes.c_char_p,  # name, NUL-terminated
            ctypes.c_char_p,  # args (protobuf)
            ctypes.c_size_t,  # args_len
            ctypes.POINTER(ctypes.c_size_t),  # result_len (out)
        ]
        self._call.restype = ctypes.c_void_p
        # The library is not thread safe; kcl-lib's binding holds the GIL, ctypes lets it go.
        self._lock = threading.Lock()

    def call(self, name: bytes, args: bytes, plugin_agent: int) -> bytes:
        length = ctypes.c_size_t(0)
        with self._lock:
            serv = self._new(plugin_agent)
            try:
                ptr = self._call(serv, name, args, len(args), ctypes.byref(length))
            finally:
                self._delete(serv)
            if not ptr:
                return b""
            try:
                # result_len bytes, as the binding copies (a caught panic leaves it 0).
                return ctypes.string_at(ptr, length.value)
            finally:
                self._free(ptr)


_native: _Native | None = None
_native_checked = False


def native() -> _Native | None:
    """The C API when the installed kcl-lib is the version its signatures were checked on."""
    global _native, _native_checked
    if not _native_checked:
        import kcl_lib._kcl_lib as ext  # imported lazily: the native library is large

        try:
            if importlib.metadata.version("kcl-lib") == KCL_LIB_VERSION:
                _native = _Native(ext.__file__)
        except (OSError, AttributeError, importlib.metadata.PackageNotFoundError):
            _native = None  # kcl-lib's own binding, below
        _native_checked = True
    return _native


_api: Any = None


def exec_program(args: Any) -> Any:
    """``kcl_lib.api.API().exec_program(args)``: the same ``ExecProgramResult``, or ``KCLError``
    with the text kcl-lib raises; the reply is freed."""
    global _api
    import kcl_lib.api as kcl_api
    from kcl_lib import plugin

    lib = native()
    if lib is None:
        if _api is None:
            _api = kcl_api.API()
        return _api.exec_program(args)
    reply = lib.call(b"KclService.ExecProgram", args.SerializeToString(), plugin.plugin_agent_addr)
    if reply.startswith(_ERROR_PREFIX):
        raise KCLError(reply.decode(encoding="utf-8")[len(_ERROR_PREFIX) :])
    result = kcl_api.ExecProgramResult()
    result.ParseFromString(reply)
    return result
