"""Python bindings for liblomas (ctypes only; no compiled module).

The shared library is found through the environment variable LOMAS_LIBRARY
(a path), else ``ctypes.util.find_library('lomas')``, else ``liblomas.so.0``.

Every failing call raises :class:`LomasError`, which carries the library's
status (``.status``, a negative ``LOMAS_E*`` value) and the thread-local
detail from ``lomas_error_message()`` (``.message``). Arguments the C types
cannot hold exactly are refused before the call, never truncated or
wrapped: an integer out of its C range raises ValueError (a non-integer,
TypeError), a string or path with a NUL byte ValueError, an unknown policy
or reference kind ValueError, and a closed object ValueError.

Structure layouts mirror ``include/lomas/lomas.h`` exactly (x86-64 System V
ABI, which ctypes follows for natural alignment):

    lomas_sample        64 bytes  (5 x uint64, double, 2 x uint32,
                                   uint8, uint8, uint16, uint32)
    lomas_window        24 bytes  (2 x uint64, 2 x uint32)
    lomas_thread        16 bytes  (2 x uint64)
    lomas_profile_info  72 bytes  (uint32 + 4 bytes padding, 7 x uint64, double)
    lomas_hot_pc       128 bytes  (uint64, 5 x double, 2 x uint64, 2 x int, 2 x char *,
                                   uint64, 2 x char *, 2 x uint32, size_t)
    lomas_hot_info      72 bytes  (uint64, uint32, int, unsigned + 4 bytes padding,
                                   2 x size_t, 2 x double, int + 4 bytes padding, size_t)
    lomas_hot_frame     24 bytes  (2 x char *, 2 x uint32)

The sizes are checked when this module is imported (see ``_LAYOUT``), and the
test suite compares every field offset with a C compiler's ``offsetof``.
"""

import collections
import ctypes
import ctypes.util
import operator
import os

__all__ = [
    "LomasError", "Config", "Profile", "Trace", "Sample", "Window", "Thread",
    "ProfileInfo", "PhaseWindow", "HotPC", "HotFrame", "HotPCs", "analyze_lackey", "default_sizes", "plot",
    "version", "version_number",
    "strerror", "OK", "EINVAL", "ENOMEM", "EIO", "EFORMAT", "ENOTSUP", "ENOENT",
    "EPERM", "ESTATE", "ERANGE", "ETARGET",
]

# Status codes (lomas.h, enum of lomas_status).
OK = 0
EINVAL = -1
ENOMEM = -2
EIO = -3
EFORMAT = -4
ENOTSUP = -5
ENOENT = -6
EPERM = -7
ESTATE = -8
ERANGE = -9
ETARGET = -10

POLICY_RANDOM = 0
POLICY_LRU = 1
MODEL_COLD = 0x1
REF_LOAD = 0
REF_STORE = 1
SAMPLE_REUSED = 0
SAMPLE_DANGLING = 1
SAMPLE_CENSORED = 2
SAMPLE_CROSS_THREAD = 0x1
EXPORT_JSON = 0
EXPORT_CSV = 1
HOT_NO_SYMBOLS = 0x100
_SYM_STATUS = {0: "ok", 1: "none", 2: "no_maps", 3: "no_map", 4: "no_file", 5: "changed",
               6: "no_symbol"}

_POLICIES = {"random": POLICY_RANDOM, "lru": POLICY_LRU}
_KINDS = {"load": REF_LOAD, "store": REF_STORE}
_STATES = {SAMPLE_REUSED: "reused", SAMPLE_DANGLING: "dangling", SAMPLE_CENSORED: "censored"}


def _load_library():
    path = os.environ.get("LOMAS_LIBRARY")
    if not path:
        path = ctypes.util.find_library("lomas") or "liblomas.so.0"
    return ctypes.CDLL(path)


_lib = _load_library()


# ------------------------------------------------------------------ structs

class _CSample(ctypes.Structure):
    _fields_ = [
        ("start", ctypes.c_uint64),
        ("end", ctypes.c_uint64),
        ("addr", ctypes.c_uint64),
        ("start_pc", ctypes.c_uint64),
        ("end_pc", ctypes.c_uint64),
        ("weight", ctypes.c_double),
        ("thread", ctypes.c_uint32),
        ("window", ctypes.c_uint32),
        ("kind", ctypes.c_uint8),
        ("state", ctypes.c_uint8),
        ("flags", ctypes.c_uint16),
        ("reserved", ctypes.c_uint32),
    ]


class _CWindow(ctypes.Structure):
    _fields_ = [
        ("start", ctypes.c_uint64),
        ("refs", ctypes.c_uint64),
        ("thread", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class _CThread(ctypes.Structure):
    _fields_ = [
        ("tid", ctypes.c_uint64),
        ("refs", ctypes.c_uint64),
    ]


class _CProfileInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("line_bytes", ctypes.c_uint32),
        ("samples", ctypes.c_uint64),
        ("reused", ctypes.c_uint64),
        ("dangling", ctypes.c_uint64),
        ("censored", ctypes.c_uint64),
        ("windows", ctypes.c_uint64),
        ("threads", ctypes.c_uint64),
        ("refs", ctypes.c_uint64),
        ("sample_weight", ctypes.c_double),
    ]


class _CHotPC(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("pc", ctypes.c_uint64),
        ("misses", ctypes.c_double),
        ("unseen_misses", ctypes.c_double),
        ("refs", ctypes.c_double),
        ("miss_ratio", ctypes.c_double),
        ("share", ctypes.c_double),
        ("samples_started", ctypes.c_uint64),
        ("samples_ended", ctypes.c_uint64),
        ("delinquent", ctypes.c_int),
        ("sym", ctypes.c_int),
        ("sym_detail", ctypes.c_char_p),
        ("module", ctypes.c_char_p),
        ("module_offset", ctypes.c_uint64),
        ("function", ctypes.c_char_p),
        ("file", ctypes.c_char_p),
        ("line", ctypes.c_uint32),
        ("column", ctypes.c_uint32),
        ("inlined", ctypes.c_size_t),
    ]


class _CHotInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("line_bytes", ctypes.c_uint32),
        ("cache_bytes", ctypes.c_uint64),
        ("policy", ctypes.c_int),
        ("flags", ctypes.c_uint),
        ("count", ctypes.c_size_t),
        ("delinquent", ctypes.c_size_t),
        ("misses", ctypes.c_double),
        ("refs", ctypes.c_double),
        ("has_maps", ctypes.c_int),
        ("cover90", ctypes.c_size_t),
    ]


class _CHotFrame(ctypes.Structure):
    _fields_ = [
        ("function", ctypes.c_char_p),
        ("file", ctypes.c_char_p),
        ("line", ctypes.c_uint32),
        ("column", ctypes.c_uint32),
    ]


# The C sizes (x86-64): a mismatch means this file and lomas.h disagree.
_LAYOUT = {_CSample: 64, _CWindow: 24, _CThread: 16, _CProfileInfo: 72, _CHotPC: 136,
           _CHotInfo: 72, _CHotFrame: 24}
for _t, _size in _LAYOUT.items():
    if ctypes.sizeof(_t) != _size:  # pragma: no cover - a broken port
        raise ImportError("lomas: ctypes layout of %s is %d bytes, C has %d"
                          % (_t.__name__, ctypes.sizeof(_t), _size))

Sample = collections.namedtuple("Sample", [f for f, _ in _CSample._fields_ if f != "reserved"])
Sample.__doc__ = """One sampled reference (lomas_sample). state is the lomas_sample_state
number (0 reused, 1 dangling, 2 censored); end is 2**64-1 for dangling samples."""
Window = collections.namedtuple("Window", ["start", "refs", "thread"])
Thread = collections.namedtuple("Thread", ["tid", "refs"])
PhaseWindow = collections.namedtuple("PhaseWindow",
                                     ["window", "thread", "start_ref", "refs", "phase"])
PhaseWindow.__doc__ = """One window's phase (lomas_profile_phases): its index, thread, first
reference (thread clock), references, and phase id (0 = a transition)."""
ProfileInfo = collections.namedtuple("ProfileInfo",
                                     [f for f, _ in _CProfileInfo._fields_ if f != "size"])
HotFrame = collections.namedtuple("HotFrame", ["function", "file", "line", "column"])
HotFrame.__doc__ = """One call site of an inlined-at chain: the function holding it, its
file and line (None when unknown)."""
HotPC = collections.namedtuple("HotPC", [
    "pc", "misses", "unseen_misses", "refs", "miss_ratio", "share", "samples_started",
    "samples_ended", "delinquent", "sym", "sym_detail", "module", "module_offset", "function",
    "file", "line", "column", "inlined"])
HotPC.__doc__ = """One instruction of Profile.hot_pcs (lomas_hot_pc): estimated misses,
references, miss ratio and share of all misses; delinquent (bool); sym, the
symbolization status ('ok', 'none', 'no_maps', 'no_map', 'no_file',
'changed', 'no_symbol') and sym_detail; module and module_offset, function,
file, line and column (None or 0 when unknown); inlined, the inlined-at chain
as a list of HotFrame, innermost call site first. Paths are str, decoded as
os.fsdecode does."""

# ---------------------------------------------------------------- prototypes

_status = ctypes.c_int
_vp = ctypes.c_void_p
_cp = ctypes.c_char_p
_u64 = ctypes.c_uint64
_u32 = ctypes.c_uint32
_size = ctypes.c_size_t
_pp = ctypes.POINTER(ctypes.c_void_p)


def _proto(name, restype, *argtypes):
    fn = getattr(_lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


_lomas_version = _proto("lomas_version", _cp)
_lomas_version_number = _proto("lomas_version_number", ctypes.c_uint)
_lomas_strerror = _proto("lomas_strerror", _cp, _status)
_lomas_error_message = _proto("lomas_error_message", _cp)
_config_new = _proto("lomas_config_new", _status, _pp)
_config_set = _proto("lomas_config_set", _status, _vp, _cp, _cp)
_config_get = _proto("lomas_config_get", _status, _vp, _cp, ctypes.c_char_p, _size)
_config_free = _proto("lomas_config_free", None, _vp)
_profile_new = _proto("lomas_profile_new", _status, _u32, _pp)
_profile_load = _proto("lomas_profile_load", _status, _cp, _pp)
_profile_save = _proto("lomas_profile_save", _status, _vp, _cp)
_profile_merge = _proto("lomas_profile_merge", _status, _vp, _vp)
_profile_free = _proto("lomas_profile_free", None, _vp)
_profile_info_get = _proto("lomas_profile_info_get", _status, _vp,
                           ctypes.POINTER(_CProfileInfo))
_profile_meta_get = _proto("lomas_profile_meta_get", _status, _vp, _cp,
                           ctypes.POINTER(ctypes.c_char_p))
_profile_meta_set = _proto("lomas_profile_meta_set", _status, _vp, _cp, _cp)
_profile_meta_count = _proto("lomas_profile_meta_count", _size, _vp)
_profile_meta_at = _proto("lomas_profile_meta_at", _status, _vp, _size,
                          ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p))
_profile_samples = _proto("lomas_profile_samples", _status, _vp, _size, _size,
                          ctypes.POINTER(_CSample), ctypes.POINTER(_size))
_profile_windows = _proto("lomas_profile_windows", _status, _vp, _size, _size,
                          ctypes.POINTER(_CWindow), ctypes.POINTER(_size))
_profile_threads = _proto("lomas_profile_threads", _status, _vp, _size, _size,
                          ctypes.POINTER(_CThread), ctypes.POINTER(_size))
_model_miss_ratio = _proto("lomas_model_miss_ratio", _status, _vp, ctypes.c_int, _u64, _u32,
                           ctypes.c_uint, ctypes.POINTER(ctypes.c_double))
_model_curve = _proto("lomas_model_curve", _status, _vp, ctypes.c_int,
                      ctypes.POINTER(_u64), _size, _u32, ctypes.c_uint,
                      ctypes.POINTER(ctypes.c_double))
_model_curve_ci = _proto("lomas_model_curve_ci", _status, _vp, ctypes.c_int,
                         ctypes.POINTER(_u64), _size, _u32, ctypes.c_uint, ctypes.c_double,
                         ctypes.c_uint, _u64, ctypes.POINTER(ctypes.c_double),
                         ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double))
_model_curve_assoc = _proto("lomas_model_curve_assoc", _status, _vp, ctypes.c_int,
                            ctypes.POINTER(_u64), _size, _u32, ctypes.c_uint, ctypes.c_uint,
                            ctypes.POINTER(ctypes.c_double))
_model_thrash_bounds = _proto("lomas_model_thrash_bounds", _status, _vp, _u64, _u32,
                              ctypes.POINTER(_u64), _size, ctypes.c_uint,
                              ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double))
class _CPhaseInfo(ctypes.Structure):
    _fields_ = [
        ("phase", ctypes.c_uint32),
        ("demand", ctypes.c_uint32),
        ("windows", ctypes.c_uint64),
        ("refs", ctypes.c_uint64),
        ("reserved", ctypes.c_uint32),
    ]


_profile_phases = _proto("lomas_profile_phases", _status, _vp, _u32, ctypes.c_double,
                         ctypes.c_uint, ctypes.POINTER(_u32), _size,
                         ctypes.POINTER(_CPhaseInfo), _size, ctypes.POINTER(_size))
_profile_phase_select = _proto("lomas_profile_phase_select", _status, _vp,
                               ctypes.POINTER(_u32), _size, _u32, _pp)
_model_default_sizes = _proto("lomas_model_default_sizes", _status, _u32,
                              ctypes.POINTER(_u64), _size, ctypes.POINTER(_size))
_profile_hot_pcs = _proto("lomas_profile_hot_pcs", _status, _vp, ctypes.c_int, _u64, _u32,
                          ctypes.c_uint, _pp)
_hot_list_count = _proto("lomas_hot_list_count", _size, _vp)
_hot_list_get = _proto("lomas_hot_list_get", _status, _vp, _size, ctypes.POINTER(_CHotPC))
_hot_list_frame = _proto("lomas_hot_list_frame", _status, _vp, _size, _size,
                         ctypes.POINTER(_CHotFrame))
_hot_list_info = _proto("lomas_hot_list_info", _status, _vp, ctypes.POINTER(_CHotInfo))
_hot_list_symbolize = _proto("lomas_hot_list_symbolize", _status, _vp, _vp, _cp)
_hot_list_free = _proto("lomas_hot_list_free", None, _vp)
_trace_new = _proto("lomas_trace_new", _status, _vp, _pp)
_trace_ref = _proto("lomas_trace_ref", _status, _vp, _u64, _u64, _u64, ctypes.c_int)
_trace_finish = _proto("lomas_trace_finish", _status, _vp, _pp)
_trace_free = _proto("lomas_trace_free", None, _vp)
_trace_analyze_lackey = _proto("lomas_trace_analyze_lackey", _status, _vp, _cp, _pp)


# ------------------------------------------------------------------- errors

class LomasError(Exception):
    """A liblomas call failed: .status (negative lomas_status), .name
    (lomas_strerror) and .message (lomas_error_message, with details)."""

    def __init__(self, status, message=None):
        self.status = status
        self.name = strerror(status)
        self.message = message if message else self.name
        super().__init__("%s (%s)" % (self.message, self.name))


def strerror(status):
    """The library's static name for a status, e.g. 'invalid argument'."""
    status = _int_value(status, "status", -(1 << 31), (1 << 31) - 1)
    return _lomas_strerror(status).decode("utf-8", "replace")


def _check(status):
    if status != OK:
        raise LomasError(status, _lomas_error_message().decode("utf-8", "replace"))


def _bytes(s, what):
    """s (str, bytes or path) as the bytes of a C string. C strings end at
    the first NUL, so one inside would silently cut the text short: as
    open() does, ValueError."""
    if isinstance(s, os.PathLike):
        s = os.fspath(s)
    if isinstance(s, str):
        s = s.encode("utf-8", "surrogateescape")
    elif isinstance(s, (bytearray, memoryview)):
        s = bytes(s)
    elif not isinstance(s, bytes):
        raise TypeError("%s must be a string, not %s" % (what, type(s).__name__))
    if b"\0" in s:
        raise ValueError("embedded null byte in %s" % what)
    return s


def _int_value(v, what, lo, hi):
    """v (an int, or anything with __index__, but not a bool) in lo..hi."""
    if isinstance(v, bool):
        raise TypeError("%s must be an int, not bool" % what)
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError("%s must be an int, not %s" % (what, type(v).__name__)) from None
    if v < lo or v > hi:
        raise ValueError("%s must be in %d..%d, not %d" % (what, lo, hi, v))
    return v


def _u64_value(v, what):
    return _int_value(v, what, 0, (1 << 64) - 1)


def _u32_value(v, what):
    return _int_value(v, what, 0, (1 << 32) - 1)


def _policy(policy):
    if isinstance(policy, int) and not isinstance(policy, bool) and policy in _POLICIES.values():
        return policy
    if isinstance(policy, str) and policy in _POLICIES:
        return _POLICIES[policy]
    raise ValueError("policy must be 'random' or 'lru', not %r" % (policy,))


def _kind(kind):
    if isinstance(kind, int) and not isinstance(kind, bool) and kind in _KINDS.values():
        return kind
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind]
    raise ValueError("kind must be 'load' or 'store', not %r" % (kind,))


def version():
    """The version of the loaded library, 'MAJOR.MINOR.PATCH'."""
    return _lomas_version().decode()


def version_number():
    """MAJOR*10000 + MINOR*100 + PATCH of the loaded library."""
    return _lomas_version_number()


# ------------------------------------------------------------------ handles

class _Handle:
    """An owned C handle: freed by close(), by garbage collection, or at the
    end of a with block. Subclasses name the C function that frees it and the
    message for use after close."""

    _free = None
    _closed_message = "the object is closed"

    def _live(self):
        h = getattr(self, "_h", None)
        if not h:
            raise ValueError(self._closed_message)
        return h

    def close(self):
        if getattr(self, "_h", None):
            type(self)._free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------- config

class Config(_Handle):
    """A set of string options (period, seed, line_bytes, window,
    max_samples_live). Keyword arguments are set in order; None is skipped."""

    _free = staticmethod(_config_free)
    _closed_message = "the config is closed"

    def __init__(self, **options):
        h = ctypes.c_void_p()
        _check(_config_new(ctypes.byref(h)))
        self._h = h
        for k, v in options.items():
            if v is not None:
                self.set(k, v)

    def set(self, key, value):
        """Set key to value (converted with str()); LomasError(EINVAL) if bad."""
        h = self._live()
        if not isinstance(value, (str, bytes)):
            value = str(value)
        _check(_config_set(h, _bytes(key, "key"), _bytes(value, "value")))
        return self

    def get(self, key):
        """The current value of key as a string."""
        h = self._live()
        buf = ctypes.create_string_buffer(128)
        _check(_config_get(h, _bytes(key, "key"), buf, len(buf)))
        return buf.value.decode()



def _config_of(config, **options):
    """A (Config, owned) pair from a live Config, None, or options."""
    if config is not None:
        if not isinstance(config, Config):
            raise TypeError("config must be a lomas.Config, not %s" % type(config).__name__)
        config._live()  # a closed one would pass NULL: the defaults, silently
        if any(v is not None for v in options.values()):
            raise ValueError("pass either a Config or options, not both")
        return config, False
    return Config(**options), True


# ------------------------------------------------------------------ profile

class Profile(_Handle):
    """A profile: samples with their reuse, and the metadata of the run.

    Create with Profile.load(path), Profile.new(line_size), Trace.finish() or
    analyze_lackey(). Use as a context manager or call close()."""

    def __init__(self, *args, **kwargs):
        # A handle from Python (an int, say) would be a pointer the library
        # trusts: only this module makes Profiles, through _adopt.
        raise TypeError("lomas.Profile cannot be made from a handle; use Profile.load(), "
                        "Profile.new(), Trace.finish() or analyze_lackey()")

    @classmethod
    def _adopt(cls, h):
        """A Profile owning h, a c_void_p the library just returned."""
        if not h:
            raise ValueError("the library returned no profile")  # pragma: no cover
        self = cls.__new__(cls)
        self._h = h
        return self

    @classmethod
    def new(cls, line_bytes=64):
        h = ctypes.c_void_p()
        _check(_profile_new(_u32_value(line_bytes, "line_bytes"), ctypes.byref(h)))
        return cls._adopt(h)

    @classmethod
    def load(cls, path):
        h = ctypes.c_void_p()
        _check(_profile_load(_bytes(path, "path"), ctypes.byref(h)))
        return cls._adopt(h)

    def save(self, path):
        _check(_profile_save(self._handle(), _bytes(path, "path")))

    def merge(self, other):
        """Add the threads, windows and samples of other to this profile."""
        if not isinstance(other, Profile):
            raise TypeError("merge needs a Profile")
        _check(_profile_merge(self._handle(), other._handle()))
        return self

    @property
    def info(self):
        """Counts: a ProfileInfo namedtuple (line_bytes, samples, reused, ...)."""
        out = _CProfileInfo(size=ctypes.sizeof(_CProfileInfo))
        _check(_profile_info_get(self._handle(), ctypes.byref(out)))
        return ProfileInfo(*(getattr(out, f) for f in ProfileInfo._fields))

    @property
    def meta(self):
        """The metadata as a dict of str to str (a copy)."""
        h = self._handle()
        out = {}
        for i in range(_profile_meta_count(h)):
            k, v = ctypes.c_char_p(), ctypes.c_char_p()
            _check(_profile_meta_at(h, i, ctypes.byref(k), ctypes.byref(v)))
            out[k.value.decode("utf-8", "replace")] = v.value.decode("utf-8", "replace")
        return out

    def meta_get(self, key):
        v = ctypes.c_char_p()
        _check(_profile_meta_get(self._handle(), _bytes(key, "key"), ctypes.byref(v)))
        return v.value.decode("utf-8", "replace")

    def meta_set(self, key, value):
        _check(_profile_meta_set(self._handle(), _bytes(key, "key"), _bytes(value, "value")))

    def _copy_out(self, fn, ctype, total, convert, chunk=65536):
        h = self._handle()
        out = []
        buf = (ctype * chunk)()
        copied = _size()
        first = 0
        while first < total:
            _check(fn(h, first, chunk, buf, ctypes.byref(copied)))
            if copied.value == 0:
                break
            out.extend(convert(buf[i]) for i in range(copied.value))
            first += copied.value
        return out

    def samples(self):
        """All samples, as a list of Sample namedtuples."""
        names = Sample._fields
        return self._copy_out(_profile_samples, _CSample, self.info.samples,
                              lambda s: Sample(*(getattr(s, f) for f in names)))

    def windows(self):
        return self._copy_out(_profile_windows, _CWindow, self.info.windows,
                              lambda w: Window(w.start, w.refs, w.thread))

    def threads(self):
        return self._copy_out(_profile_threads, _CThread, self.info.threads,
                              lambda t: Thread(t.tid, t.refs))

    def miss_ratio(self, cache_bytes, policy="random", cold=False, line_bytes=0):
        """The modelled miss ratio (0..1) of a fully associative cache."""
        r = ctypes.c_double()
        _check(_model_miss_ratio(self._handle(), _policy(policy),
                                 _u64_value(cache_bytes, "cache_bytes"),
                                 _u32_value(line_bytes, "line_bytes"),
                                 MODEL_COLD if cold else 0, ctypes.byref(r)))
        return r.value

    def curve(self, sizes=None, policy="random", cold=False, line_bytes=0, ci=False,
              level=0.95, resamples=200, seed=1, ways=0):
        """Miss ratios for a list of cache sizes (default: default_sizes of
        the profile's line size) as a list of floats.

        ways: the caches' associativity (lomas_model_curve_assoc; 0, the
        default, is fully associative); each size then a whole number of
        sets (ways x line size). Not with ci=True.

        With ci=True, a list of (ratio, lo, hi) tuples instead: [lo, hi] is
        the level (default 95 %) confidence interval of each ratio from a
        Poisson bootstrap of the samples (lomas_model_curve_ci: resamples
        replicates, deterministic for a seed; sampling noise only)."""
        if sizes is None:
            sizes = default_sizes(self.info.line_bytes)
        sizes = [_u64_value(s, "cache size") for s in sizes]
        n = len(sizes)
        arr = (_u64 * max(n, 1))(*sizes)
        out = (ctypes.c_double * max(n, 1))()
        flags = MODEL_COLD if cold else 0
        line_bytes = _u32_value(line_bytes, "line_bytes")
        ways = _u32_value(ways, "ways")
        if ways and ci:
            raise ValueError("ci is for fully associative caches: not with ways")
        if ways:
            _check(_model_curve_assoc(self._handle(), _policy(policy), arr, n, line_bytes,
                                      ways, flags, out))
            return list(out[:n])
        if not ci:
            _check(_model_curve(self._handle(), _policy(policy), arr, n, line_bytes, flags,
                                out))
            return list(out[:n])
        if not isinstance(level, (int, float)) or isinstance(level, bool) or \
                not 0.0 < level < 1.0:
            raise ValueError("level must be a number between 0 and 1")
        if not isinstance(resamples, int) or isinstance(resamples, bool) or \
                not 2 <= resamples <= 100000:
            raise ValueError("resamples must be an integer from 2 to 100000")
        lo = (ctypes.c_double * max(n, 1))()
        hi = (ctypes.c_double * max(n, 1))()
        _check(_model_curve_ci(self._handle(), _policy(policy), arr, n, line_bytes, flags,
                               float(level), resamples, _u64_value(seed, "seed"), out, lo, hi))
        return [(out[i], lo[i], hi[i]) for i in range(n)]

    def thrash_bounds(self, cache_bytes, quanta, cold=False, line_bytes=0):
        """Miss-ratio bounds of an LRU cache of cache_bytes shared with other
        programs (lomas_model_thrash_bounds): (lower, [upper per quantum]),
        lower the warm cache's miss ratio, upper that of a cache emptied of
        this program's lines every quantum of its references (quanta: one
        count or a list)."""
        single = isinstance(quanta, int) and not isinstance(quanta, bool)
        qs = [_u64_value(q, "quantum") for q in ([quanta] if single else quanta)]
        n = len(qs)
        arr = (_u64 * max(n, 1))(*qs)
        up = (ctypes.c_double * max(n, 1))()
        lo = ctypes.c_double()
        _check(_model_thrash_bounds(self._handle(), _u64_value(cache_bytes, "cache_bytes"),
                                    _u32_value(line_bytes, "line_bytes"), arr, n,
                                    MODEL_COLD if cold else 0, ctypes.byref(lo), up))
        return lo.value, (up[0] if single else list(up[:n]))

    def _phase_ids(self, buckets, threshold, transition_threshold):
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or \
                not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be a number from 0 to 1 (0: the default 0.8)")
        if not isinstance(transition_threshold, int) or isinstance(transition_threshold, bool) \
                or not 0 <= transition_threshold < 2**32:
            raise ValueError("transition_threshold must be an unsigned integer")
        n = self.info.windows
        wp = (_u32 * max(n, 1))()
        nph = _size()
        _check(_profile_phases(self._handle(), _u32_value(buckets, "buckets"), float(threshold),
                               transition_threshold, wp, n, None, 0, ctypes.byref(nph)))
        return wp, n, nph.value

    def phases(self, buckets=0, threshold=0.0, transition_threshold=0):
        """Each window's phase (lomas_profile_phases): a list of PhaseWindow
        records (window, thread, start_ref, refs, phase), phase 0 for the
        transitions. buckets: the signature cache's sets (0 = 1024);
        threshold: the cosine that joins a phase (0 = 0.8);
        transition_threshold: windows alike that make a new phase (0 = 2)."""
        wp, n, _ = self._phase_ids(buckets, threshold, transition_threshold)
        return [PhaseWindow(i, w.thread, w.start, w.refs, wp[i])
                for i, w in enumerate(self.windows())][:n]

    def phase_profile(self, phase, buckets=0, threshold=0.0, transition_threshold=0):
        """A new Profile of one phase's windows alone
        (lomas_profile_phase_select): its curve() is the phase's own."""
        wp, n, nph = self._phase_ids(buckets, threshold, transition_threshold)
        if not isinstance(phase, int) or isinstance(phase, bool) or not 0 <= phase < nph:
            raise ValueError("phase %r: the profile has phases 0 to %d" % (phase, nph - 1))
        h = ctypes.c_void_p()
        _check(_profile_phase_select(self._handle(), wp, n, _u32_value(phase, "phase"),
                                     ctypes.byref(h)))
        return Profile._adopt(h)

    def hot_pcs(self, cache_bytes, policy="random", cold=False, line_bytes=0, symbols=True,
                debug_path=None):
        """The instructions that miss in a fully associative cache of
        cache_bytes (lomas_profile_hot_pcs): a HotPCs list of HotPC records,
        most misses first, the delinquent set (90 % of the misses) first.
        symbols=False skips symbolization; debug_path: directories of separate
        debug files (':'-separated; default /usr/lib/debug)."""
        h = self._handle()
        flags = (MODEL_COLD if cold else 0) | (0 if symbols else HOT_NO_SYMBOLS)
        lst = ctypes.c_void_p()
        _check(_profile_hot_pcs(h, _policy(policy), _u64_value(cache_bytes, "cache_bytes"),
                                _u32_value(line_bytes, "line_bytes"), flags, ctypes.byref(lst)))
        try:
            if symbols and debug_path is not None:
                _check(_hot_list_symbolize(lst, h, _bytes(debug_path, "debug_path")))
            return _hot_list(lst)
        finally:
            _hot_list_free(lst)

    _free = staticmethod(_profile_free)
    _closed_message = "the profile is closed"
    _handle = _Handle._live

    @property
    def closed(self):
        return not getattr(self, "_h", None)


    def __repr__(self):
        if self.closed:
            return "<lomas.Profile closed>"
        i = self.info
        return "<lomas.Profile %d samples, %d refs, line %d>" % (i.samples, i.refs, i.line_bytes)


# ---------------------------------------------------------------- hot pcs

def _path(b):
    return os.fsdecode(b) if b is not None else None


class HotPCs(list):
    """The HotPC records of Profile.hot_pcs, with the list's totals:
    cache_bytes, line_bytes, policy ('random' or 'lru'), cold, misses (all
    estimated misses), refs (misses / refs is the model's miss ratio),
    cover90 (the first `cover90` records are the fewest that cover 90 % of the
    misses), delinquent (the delinquent set, the first `delinquent` records:
    those and every record with 1 % of the misses or more) and has_maps
    (False when the profile records no memory maps)."""


def _hot_list(lst):
    info = _CHotInfo(size=ctypes.sizeof(_CHotInfo))
    _check(_hot_list_info(lst, ctypes.byref(info)))
    out = HotPCs()
    e = _CHotPC(size=ctypes.sizeof(_CHotPC))
    f = _CHotFrame()
    for i in range(_hot_list_count(lst)):
        _check(_hot_list_get(lst, i, ctypes.byref(e)))
        frames = []
        for j in range(e.inlined):
            _check(_hot_list_frame(lst, i, j, ctypes.byref(f)))
            frames.append(HotFrame(
                f.function.decode("utf-8", "replace") if f.function else None,
                _path(f.file), f.line or None, f.column or None))
        out.append(HotPC(
            e.pc, e.misses, e.unseen_misses, e.refs, e.miss_ratio, e.share, e.samples_started,
            e.samples_ended, bool(e.delinquent), _SYM_STATUS.get(e.sym, str(e.sym)),
            e.sym_detail.decode("utf-8", "replace") if e.sym_detail else "",
            _path(e.module), e.module_offset if e.module else None,
            e.function.decode("utf-8", "replace") if e.function else None,
            _path(e.file), e.line or None, e.column or None, frames))
    out.cache_bytes = info.cache_bytes
    out.line_bytes = info.line_bytes
    out.policy = "lru" if info.policy == POLICY_LRU else "random"
    out.cold = bool(info.flags & MODEL_COLD)
    out.misses = info.misses
    out.refs = info.refs
    out.delinquent = info.delinquent
    out.cover90 = info.cover90
    out.has_maps = bool(info.has_maps)
    return out


def plot(profiles, sizes=None, policies=("random", "lru"), cold=False, labels=None, ax=None,
         caches=True):
    """Draw working-set graphs with matplotlib (Debian: python3-matplotlib):
    miss ratio against cache size on a log2 axis with binary units, random
    replacement solid and LRU dashed, one colour per profile, this machine's
    caches (sysfs) marked, bands where the model gives a confidence interval.
    profiles: a Profile or a list of them; labels: their legend names.
    Returns the matplotlib Axes. ImportError, saying what to install, when
    matplotlib is missing."""
    from . import _plot
    return _plot.plot(profiles, sizes=sizes, policies=policies, cold=cold, labels=labels, ax=ax,
                      caches=caches)


# -------------------------------------------------------------------- trace

class Trace(_Handle):
    """The trace clock, fed from Python: ref() every reference in order,
    then finish() for the Profile. Options as for Config (period=1 samples
    every reference)."""

    _free = staticmethod(_trace_free)
    _closed_message = "the trace is finished"

    def __init__(self, config=None, **options):
        cfg, owned = _config_of(config, **options)
        try:
            h = ctypes.c_void_p()
            _check(_trace_new(cfg._live(), ctypes.byref(h)))
            self._h = h
        finally:
            if owned:
                cfg.close()

    def ref(self, addr, thread=0, pc=0, kind="load"):
        """One reference to addr by thread, made by the instruction at pc
        (each a 64-bit unsigned integer; kind 'load' or 'store')."""
        h = self._live()
        _check(_trace_ref(h, _u64_value(thread, "thread"), _u64_value(addr, "addr"),
                          _u64_value(pc, "pc"), _kind(kind)))

    def refs(self, addrs, thread=0, pc=0, kind="load"):
        """Many loads (or stores) by one thread, in order. Each address is
        checked as it comes: a bad one raises, after those before it were fed."""
        h = self._live()
        thread, pc, k = _u64_value(thread, "thread"), _u64_value(pc, "pc"), _kind(kind)
        for a in addrs:
            st = _trace_ref(h, thread, _u64_value(a, "addr"), pc, k)
            if st:
                _check(st)

    def finish(self):
        """End the run and return its Profile; the trace is closed after."""
        h = self._live()
        p = ctypes.c_void_p()
        try:
            _check(_trace_finish(h, ctypes.byref(p)))
        finally:
            self.close()
        return Profile._adopt(p)



def analyze_lackey(path, period=None, seed=None, line_bytes=None, window=None, config=None):
    """Read Valgrind lackey --trace-mem=yes output (path, '-' = stdin)
    through the trace clock and return the Profile."""
    cfg, owned = _config_of(config, period=period, seed=seed, line_bytes=line_bytes,
                            window=window)
    try:
        h = ctypes.c_void_p()
        _check(_trace_analyze_lackey(cfg._live(), _bytes(path, "path"), ctypes.byref(h)))
        return Profile._adopt(h)
    finally:
        if owned:
            cfg.close()


def default_sizes(line_bytes=64):
    """The default working-set-graph cache sizes (1 KiB to 1 GiB, 4 per octave)."""
    line_bytes = _u32_value(line_bytes, "line_bytes")
    cap = 256
    while True:
        arr = (_u64 * cap)()
        n = _size()
        _check(_model_default_sizes(line_bytes, arr, cap, ctypes.byref(n)))
        if n.value <= cap:
            return list(arr[:n.value])
        cap = n.value
