/*
 * The forward hop's hot loop in C: move well-formed request messages from a worker-facing
 * PULL socket to the engine's PUSH socket without a Python call per frame.
 *
 * Contract (see router_core/fastpath.py, which owns the Python side):
 *   - It calls libzmq through function pointers handed over by bind_libzmq(), taken from
 *     the very libzmq that pyzmq loaded, so the socket handles are shared safely.
 *   - It forwards only a message it can prove well-formed: exactly two frames, the header
 *     in the canonical encoding of router_core.wire.Header (a 6-element array, or 7 with an
 *     empty row_traces; one rid, one reply_to, ASCII strings) with a kind in the accepted
 *     set and, when asked, no trace context (a traced request goes to Python for its span). That set of headers
 *     is a subset of what the Python decoder accepts, so the fast path never lets through
 *     a message the Python path would reject.
 *   - Every other message is handed back to Python, frame by frame, untouched, for the
 *     full decode and counting. A message the engine socket refuses (EAGAIN) is handed
 *     back too, so Python can queue it in the destination's bounded backlog.
 *   - It sums what it forwarded per owning worker (messages, bytes) and the hop latency
 *     (now - the header's sent_ns) into buckets, and returns the sums with each call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef struct {
    unsigned char _[64];
} __attribute__((aligned(sizeof(void *)))) sb_msg_t;

typedef int (*msg_init_fn)(sb_msg_t *);
typedef int (*msg_close_fn)(sb_msg_t *);
typedef int (*msg_recv_fn)(sb_msg_t *, void *, int);
typedef int (*msg_send_fn)(sb_msg_t *, void *, int);
typedef void *(*msg_data_fn)(sb_msg_t *);
typedef size_t (*msg_size_fn)(const sb_msg_t *);
typedef int (*msg_more_fn)(const sb_msg_t *);
typedef int (*errno_fn)(void);

typedef struct {
    void *socket;
    int fd;
    short events;
    short revents;
} sb_pollitem_t;
typedef int (*poll_fn)(sb_pollitem_t *, int, long);
typedef int (*send_fn)(void *, const void *, size_t, int);

static struct {
    msg_init_fn init;
    msg_close_fn close;
    msg_recv_fn recv;
    msg_send_fn send;
    msg_data_fn data;
    msg_size_fn size;
    msg_more_fn more;
    errno_fn error;
    poll_fn poll;
    send_fn send_buf;
} zmq_api;
static int zmq_api_ready = 0;

#define SB_DONTWAIT 1
#define SB_SNDMORE 2
#define SB_MAX_FRAMES 4097
#define SB_POLLIN 1

enum { STATUS_EMPTY = 0, STATUS_BUDGET = 1, STATUS_HANDOFF = 2, STATUS_BLOCKED = 3 };

/* ------------------------------------------------------------------ header check */

/* Read one msgpack string at *p; ASCII only (so UTF-8 validity is certain). The string's
 * bytes and length are stored in *out / *out_len when those are not NULL. */
static int read_ascii_str(const unsigned char **p, const unsigned char *end, const unsigned char **out,
                          size_t *out_len) {
    if (*p >= end) return 0;
    unsigned char tag = **p;
    size_t len;
    (*p)++;
    if (tag >= 0xa0 && tag <= 0xbf) {
        len = tag & 0x1f;
    } else if (tag == 0xd9) {
        if (end - *p < 1) return 0;
        len = (*p)[0];
        *p += 1;
    } else if (tag == 0xda) {
        if (end - *p < 2) return 0;
        len = ((size_t)(*p)[0] << 8) | (*p)[1];
        *p += 2;
    } else {
        return 0;
    }
    if ((size_t)(end - *p) < len) return 0;
    for (size_t i = 0; i < len; i++) {
        if ((*p)[i] & 0x80) return 0;
    }
    if (out != NULL) *out = *p;
    if (out_len != NULL) *out_len = len;
    *p += len;
    return 1;
}

/* Read one msgpack integer at *p (any width msgspec decodes into a Python int) into
 * *value; a value outside int64 (a huge uint64) is stored as 0, "unknown". */
static int read_int(const unsigned char **p, const unsigned char *end, long long *value) {
    if (*p >= end) return 0;
    unsigned char tag = **p;
    (*p)++;
    if (tag <= 0x7f) {
        *value = tag;
        return 1;
    }
    if (tag >= 0xe0) {
        *value = (signed char)tag;
        return 1;
    }
    size_t width;
    int is_signed;
    switch (tag) {
        case 0xcc: width = 1; is_signed = 0; break;
        case 0xcd: width = 2; is_signed = 0; break;
        case 0xce: width = 4; is_signed = 0; break;
        case 0xcf: width = 8; is_signed = 0; break;
        case 0xd0: width = 1; is_signed = 1; break;
        case 0xd1: width = 2; is_signed = 1; break;
        case 0xd2: width = 4; is_signed = 1; break;
        case 0xd3: width = 8; is_signed = 1; break;
        default: return 0;
    }
    if ((size_t)(end - *p) < width) return 0;
    unsigned long long raw = 0;
    for (size_t i = 0; i < width; i++) raw = (raw << 8) | (*p)[i];
    *p += width;
    if (is_signed && width < 8 && (raw >> (width * 8 - 1))) raw |= ~0ULL << (width * 8); /* sign-extend */
    if (!is_signed && width == 8 && raw > (unsigned long long)INT64_MAX) raw = 0;
    *value = (long long)raw;
    return 1;
}

/* What the header check learns about a canonical request header. */
#define SB_MAX_ADDRESS 255

typedef struct {
    int kind;
    const unsigned char *reply_to; /* the owning worker's return address (not terminated) */
    size_t reply_to_len;
    long long sent_ns;
} sb_header_t;

/* Check a canonical single-request header: a 6-element array, or the 7-element form whose
 * row_traces is empty; one rid and one reply_to; ASCII strings; kind in kinds. With
 * untraced_only, a header carrying a traceparent is not canonical (so Python makes its
 * span). Returns the kind, or -1 if not provably well-formed. */
static int canonical_header(const unsigned char *data, size_t size, const char *kinds, Py_ssize_t nkinds,
                            int untraced_only, sb_header_t *out) {
    const unsigned char *p = data, *end = data + size;
    size_t trace_len = 0;
    if (size < 8 || (p[0] != 0x96 && p[0] != 0x97) || p[1] >= 0x80) return -1;
    int seven = p[0] == 0x97;
    int kind = p[1];
    if (memchr(kinds, kind, (size_t)nkinds) == NULL) return -1;
    p += 2;
    if (*p++ != 0x91 || !read_ascii_str(&p, end, NULL, NULL)) return -1; /* rids: exactly one */
    if (p >= end || *p++ != 0x91 || !read_ascii_str(&p, end, &out->reply_to, &out->reply_to_len))
        return -1;                                                         /* reply_to */
    if (!read_int(&p, end, &out->sent_ns)) return -1;                      /* sent_ns */
    if (!read_ascii_str(&p, end, NULL, &trace_len)) return -1;             /* traceparent */
    if (!read_ascii_str(&p, end, NULL, NULL)) return -1;                   /* tracestate */
    if (seven && (p >= end || *p++ != 0x90)) return -1;                    /* row_traces: [] */
    if (untraced_only && trace_len != 0) return -1;
    if (out->reply_to_len > SB_MAX_ADDRESS) return -1; /* too long to count by: Python's */
    out->kind = kind;
    return p == end ? kind : -1;
}

/* ------------------------------------------------------------------ per-call accounting */

/* Traffic per owning worker and hop latency, summed over one forward() call and handed to
 * Python at its end, so the per-message cost is a hash-free scan of a few entries. */
#define SB_MAX_SOURCES 32
#define SB_MAX_BOUNDS 32

typedef struct {
    char address[SB_MAX_ADDRESS];
    size_t address_len;
    Py_ssize_t messages;
    long long bytes;
} sb_source_t;

typedef struct {
    sb_source_t sources[SB_MAX_SOURCES];
    int nsources;
    long long bounds_ns[SB_MAX_BOUNDS]; /* hop latency bucket upper bounds */
    int nbounds;
    Py_ssize_t latency_counts[SB_MAX_BOUNDS + 1];
    double latency_sum_s;
} sb_accounting_t;

/* The table entry of a message's owner, added (with nothing counted yet) if new. Called
 * while the header's bytes are still ours: once a frame is sent its data belongs to
 * libzmq, so the address is copied here and counted only after the send succeeded.
 * The caller guarantees room (a call ends as soon as the table is full). */
static sb_source_t *source_of(sb_accounting_t *acc, const sb_header_t *h) {
    size_t len = h->reply_to_len; /* at most SB_MAX_ADDRESS: canonical_header checks */
    for (int i = 0; i < acc->nsources; i++) {
        sb_source_t *s = &acc->sources[i];
        if (s->address_len == len && memcmp(s->address, h->reply_to, len) == 0) return s;
    }
    sb_source_t *s = &acc->sources[acc->nsources++];
    memcpy(s->address, h->reply_to, len);
    s->address_len = len;
    s->messages = 0;
    s->bytes = 0;
    return s;
}

static long long realtime_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static void account_latency(sb_accounting_t *acc, long long sent_ns, long long now_ns) {
    if (sent_ns <= 0) return; /* the sender did not stamp it */
    long long elapsed = now_ns - sent_ns;
    if (elapsed < 0) elapsed = 0;
    int slot = 0;
    while (slot < acc->nbounds && elapsed > acc->bounds_ns[slot]) slot++;
    acc->latency_counts[slot]++;
    acc->latency_sum_s += (double)elapsed / 1e9;
}

/* (((address bytes, messages, bytes), ...), [count per bucket incl. +Inf], latency sum s) */
static PyObject *accounting_result(const sb_accounting_t *acc) {
    PyObject *sources = PyList_New(0);
    if (sources == NULL) return NULL;
    for (int i = 0; i < acc->nsources; i++) {
        const sb_source_t *s = &acc->sources[i];
        if (s->messages == 0) continue; /* its only message was handed back */
        PyObject *entry = Py_BuildValue("(y#nL)", s->address, (Py_ssize_t)s->address_len, s->messages, s->bytes);
        if (entry == NULL || PyList_Append(sources, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(sources);
            return NULL;
        }
        Py_DECREF(entry);
    }
    PyObject *buckets = PyList_New(acc->nbounds + 1);
    if (buckets == NULL) {
        Py_DECREF(sources);
        return NULL;
    }
    for (int i = 0; i <= acc->nbounds; i++) {
        PyObject *count = PyLong_FromSsize_t(acc->latency_counts[i]);
        if (count == NULL) {
            Py_DECREF(sources);
            Py_DECREF(buckets);
            return NULL;
        }
        PyList_SET_ITEM(buckets, i, count);
    }
    return Py_BuildValue("(NNd)", sources, buckets, acc->latency_sum_s);
}

/* ------------------------------------------------------------------ helpers */

static PyObject *msg_to_bytes(sb_msg_t *msg) {
    PyObject *out = PyBytes_FromStringAndSize((const char *)zmq_api.data(msg), (Py_ssize_t)zmq_api.size(msg));
    zmq_api.close(msg);
    return out;
}

/* Raise OSError(errno, text); router_core/fastpath.py turns it into zmq.ZMQError. */
static PyObject *raise_zmq_error(int err, const char *what) {
    PyObject *args = Py_BuildValue("(is)", err, what);
    if (args != NULL) {
        PyErr_SetObject(PyExc_OSError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *zmq_failure(void) { return raise_zmq_error(zmq_api.error(), "libzmq call failed"); }

/* Append msg (consumed) and the rest of its message to a new list. */
static PyObject *collect(sb_msg_t *first, sb_msg_t *second, void *src) {
    PyObject *frames = PyList_New(0);
    if (frames == NULL) return NULL;
    sb_msg_t *held[2] = {first, second};
    int more = 0;
    for (int i = 0; i < 2 && held[i] != NULL; i++) {
        more = zmq_api.more(held[i]);
        PyObject *b = msg_to_bytes(held[i]);
        if (b == NULL || PyList_Append(frames, b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(frames);
            return NULL;
        }
        Py_DECREF(b);
    }
    while (more) {
        sb_msg_t part;
        zmq_api.init(&part);
        if (zmq_api.recv(&part, src, 0) < 0) {
            zmq_api.close(&part);
            Py_DECREF(frames);
            return zmq_failure();
        }
        more = zmq_api.more(&part);
        if (PyList_GET_SIZE(frames) > SB_MAX_FRAMES) {
            zmq_api.close(&part); /* Python sees MAX_FRAMES+1 frames: too_many_frames */
            continue;
        }
        PyObject *b = msg_to_bytes(&part);
        if (b == NULL || PyList_Append(frames, b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(frames);
            return NULL;
        }
        Py_DECREF(b);
    }
    return frames;
}

/* ------------------------------------------------------------------ module functions */

static long long monotonic_us(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

static PyObject *bind_libzmq(PyObject *self, PyObject *args) {
    unsigned long long a[10];
    if (!PyArg_ParseTuple(args, "KKKKKKKKKK", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7],
                          &a[8], &a[9]))
        return NULL;
    for (int i = 0; i < 10; i++) {
        if (a[i] == 0) {
            PyErr_SetString(PyExc_ValueError, "null libzmq function pointer");
            return NULL;
        }
    }
    zmq_api.init = (msg_init_fn)(uintptr_t)a[0];
    zmq_api.close = (msg_close_fn)(uintptr_t)a[1];
    zmq_api.recv = (msg_recv_fn)(uintptr_t)a[2];
    zmq_api.send = (msg_send_fn)(uintptr_t)a[3];
    zmq_api.data = (msg_data_fn)(uintptr_t)a[4];
    zmq_api.size = (msg_size_fn)(uintptr_t)a[5];
    zmq_api.more = (msg_more_fn)(uintptr_t)a[6];
    zmq_api.error = (errno_fn)(uintptr_t)a[7];
    zmq_api.poll = (poll_fn)(uintptr_t)a[8];
    zmq_api.send_buf = (send_fn)(uintptr_t)a[9];
    zmq_api_ready = 1;
    Py_RETURN_NONE;
}

/* recv_frames(src, max_frames) -> every frame of the next message as bytes, or None if
 * no message is waiting. Frames past max_frames are received and discarded, so the list
 * then has max_frames + 1 entries and the caller can tell the message was too long. */
static PyObject *recv_frames(PyObject *self, PyObject *args) {
    unsigned long long src_addr;
    Py_ssize_t max_frames;
    if (!PyArg_ParseTuple(args, "Kn", &src_addr, &max_frames)) return NULL;
    if (!zmq_api_ready) {
        PyErr_SetString(PyExc_RuntimeError, "bind_libzmq() has not been called");
        return NULL;
    }
    void *src = (void *)(uintptr_t)src_addr;
    PyObject *frames = PyList_New(0);
    if (frames == NULL) return NULL;
    int flags = SB_DONTWAIT, more = 1;
    while (more) {
        sb_msg_t part;
        zmq_api.init(&part);
        if (zmq_api.recv(&part, src, flags) < 0) {
            int err = zmq_api.error();
            zmq_api.close(&part);
            Py_DECREF(frames);
            if (err == EAGAIN && flags == SB_DONTWAIT) Py_RETURN_NONE;
            return raise_zmq_error(err, "receiving");
        }
        flags = 0; /* the rest of a multipart message has arrived with its first frame */
        more = zmq_api.more(&part);
        if (PyList_GET_SIZE(frames) > max_frames) {
            zmq_api.close(&part);
            continue;
        }
        PyObject *b = msg_to_bytes(&part);
        if (b == NULL || PyList_Append(frames, b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(frames);
            return NULL; /* the rest of the message stays queued: the socket is now unusable */
        }
        Py_DECREF(b);
    }
    return frames;
}

/* send_frames(dst, frames) -> True if sent, False if the peer's queue is full (EAGAIN).
 * Frames are any objects with the buffer protocol. Only the first frame can meet
 * EAGAIN: once it is accepted the rest of the message is too. */
static PyObject *send_frames(PyObject *self, PyObject *args) {
    unsigned long long dst_addr;
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "KO", &dst_addr, &seq)) return NULL;
    if (!zmq_api_ready) {
        PyErr_SetString(PyExc_RuntimeError, "bind_libzmq() has not been called");
        return NULL;
    }
    void *dst = (void *)(uintptr_t)dst_addr;
    PyObject *fast = PySequence_Fast(seq, "frames must be a sequence");
    if (fast == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    if (count == 0) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "a message needs at least one frame");
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_buffer view;
        if (PyObject_GetBuffer(items[i], &view, PyBUF_SIMPLE) < 0) {
            Py_DECREF(fast);
            return NULL;
        }
        int flags = (i + 1 < count ? SB_SNDMORE : 0) | (i == 0 ? SB_DONTWAIT : 0);
        int rc = zmq_api.send_buf(dst, view.buf, (size_t)view.len, flags);
        PyBuffer_Release(&view);
        if (rc < 0) {
            int err = zmq_api.error();
            Py_DECREF(fast);
            if (i == 0 && err == EAGAIN) Py_RETURN_FALSE;
            return raise_zmq_error(err, "sending");
        }
    }
    Py_DECREF(fast);
    Py_RETURN_TRUE;
}

static PyObject *header_kind(PyObject *self, PyObject *args) {
    Py_buffer header;
    const char *kinds;
    Py_ssize_t nkinds;
    int untraced_only = 0;
    if (!PyArg_ParseTuple(args, "y*y#|p", &header, &kinds, &nkinds, &untraced_only)) return NULL;
    sb_header_t parsed;
    int kind = canonical_header((const unsigned char *)header.buf, (size_t)header.len, kinds, nkinds,
                                untraced_only, &parsed);
    PyBuffer_Release(&header);
    return PyLong_FromLong(kind);
}

static PyObject *forward(PyObject *self, PyObject *args) {
    unsigned long long src_addr, dst_addr;
    Py_ssize_t budget, nkinds;
    long linger_ms;
    const char *kinds;
    PyObject *bounds;
    int untraced_only;
    if (!PyArg_ParseTuple(args, "KKny#lOp", &src_addr, &dst_addr, &budget, &kinds, &nkinds, &linger_ms,
                          &bounds, &untraced_only))
        return NULL;
    if (!zmq_api_ready) {
        PyErr_SetString(PyExc_RuntimeError, "bind_libzmq() has not been called");
        return NULL;
    }
    sb_accounting_t acc;
    acc.nsources = 0;
    acc.latency_sum_s = 0.0;
    if (!PyTuple_Check(bounds) || PyTuple_GET_SIZE(bounds) > SB_MAX_BOUNDS) {
        PyErr_SetString(PyExc_ValueError, "bounds must be a tuple of at most 32 ints (ns)");
        return NULL;
    }
    acc.nbounds = (int)PyTuple_GET_SIZE(bounds);
    for (int i = 0; i < acc.nbounds; i++) {
        acc.bounds_ns[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(bounds, i));
        if (acc.bounds_ns[i] == -1 && PyErr_Occurred()) return NULL;
    }
    memset(acc.latency_counts, 0, sizeof(acc.latency_counts));
    void *src = (void *)(uintptr_t)src_addr, *dst = (void *)(uintptr_t)dst_addr;
    Py_ssize_t counts[128] = {0};
    int status = STATUS_BUDGET;
    long long linger_until = monotonic_us() + (long long)linger_ms * 1000;
    PyObject *frames = Py_None;
    Py_INCREF(Py_None);

    for (Py_ssize_t n = 0; n < budget; n++) {
        sb_msg_t head, body;
        zmq_api.init(&head);
        if (zmq_api.recv(&head, src, SB_DONTWAIT) < 0) {
            int err = zmq_api.error();
            zmq_api.close(&head);
            if (err == EAGAIN) {
                /* Traffic is flowing (we were called because input was ready): wait a
                 * moment for the next message in C rather than paying a trip through the
                 * Python loop per message. Bounded: one call waits at most linger_ms in
                 * all, so other sockets are served promptly; the GIL is released. */
                int ready = 0;
                long long left_us = linger_until - monotonic_us();
                if (left_us > 0) {
                    sb_pollitem_t item = {src, 0, SB_POLLIN, 0};
                    Py_BEGIN_ALLOW_THREADS
                    ready = zmq_api.poll(&item, 1, (long)((left_us + 999) / 1000));
                    Py_END_ALLOW_THREADS
                }
                if (ready > 0) {
                    n--;
                    continue;
                }
                status = STATUS_EMPTY;
                break;
            }
            Py_DECREF(frames);
            return raise_zmq_error(err, "receiving");
        }
        int kind = -1;
        sb_header_t parsed;
        if (zmq_api.more(&head))
            kind = canonical_header(zmq_api.data(&head), zmq_api.size(&head), kinds, nkinds, untraced_only,
                                    &parsed);
        if (kind < 0) {
            Py_DECREF(frames);
            frames = collect(&head, NULL, src);
            if (frames == NULL) return NULL;
            status = STATUS_HANDOFF;
            break;
        }
        zmq_api.init(&body);
        if (zmq_api.recv(&body, src, 0) < 0) {
            zmq_api.close(&head);
            zmq_api.close(&body);
            Py_DECREF(frames);
            return zmq_failure();
        }
        if (zmq_api.more(&body)) {
            Py_DECREF(frames);
            frames = collect(&head, &body, src);
            if (frames == NULL) return NULL;
            status = STATUS_HANDOFF;
            break;
        }
        /* Sizes and the owner are read before sending: a sent frame's data belongs to
         * libzmq (parsed.reply_to points into it). */
        size_t nbytes = zmq_api.size(&head) + zmq_api.size(&body);
        sb_source_t *source = source_of(&acc, &parsed);
        if (zmq_api.send(&head, dst, SB_SNDMORE | SB_DONTWAIT) < 0) {
            int err = zmq_api.error();
            if (err != EAGAIN) {
                zmq_api.close(&head);
                zmq_api.close(&body);
                Py_DECREF(frames);
                return raise_zmq_error(err, "sending");
            }
            Py_DECREF(frames);
            frames = collect(&head, &body, src);
            if (frames == NULL) return NULL;
            status = STATUS_BLOCKED;
            break;
        }
        /* Once the first frame is accepted the rest of the message is too. */
        if (zmq_api.send(&body, dst, 0) < 0) {
            zmq_api.close(&body);
            Py_DECREF(frames);
            return zmq_failure();
        }
        counts[kind]++;
        account_latency(&acc, parsed.sent_ns, realtime_ns());
        source->messages++;
        source->bytes += (long long)nbytes;
        /* A full table ends the call (status BUDGET) so Python reads it and calls again. */
        if (acc.nsources == SB_MAX_SOURCES) break;
    }

    PyObject *count_list = PyList_New(nkinds);
    if (count_list == NULL) {
        Py_DECREF(frames);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkinds; i++) {
        PyObject *count = PyLong_FromSsize_t(counts[(unsigned char)kinds[i] & 0x7f]);
        if (count == NULL) {
            Py_DECREF(count_list);
            Py_DECREF(frames);
            return NULL;
        }
        PyList_SET_ITEM(count_list, i, count);
    }
    PyObject *accounting = accounting_result(&acc);
    if (accounting == NULL) {
        Py_DECREF(count_list);
        Py_DECREF(frames);
        return NULL;
    }
    return Py_BuildValue("iNNN", status, count_list, frames, accounting);
}

static PyMethodDef methods[] = {
    {"bind_libzmq", bind_libzmq, METH_VARARGS,
     "bind_libzmq(init, close, recv, send, data, size, more, errno, poll, zmq_send)."},
    {"recv_frames", recv_frames, METH_VARARGS,
     "recv_frames(src, max_frames) -> list of bytes for the next message, or None."},
    {"send_frames", send_frames, METH_VARARGS,
     "send_frames(dst, frames) -> True if sent, False on EAGAIN of the first frame."},
    {"header_kind", header_kind, METH_VARARGS,
     "header_kind(header, kinds, untraced_only=False) -> kind of a canonical header, else -1."},
    {"forward", forward, METH_VARARGS,
     "forward(src, dst, budget, kinds, linger_ms, bounds_ns, untraced_only) -> (status, counts per "
     "kind, frames or None, (sources, latency bucket counts, latency sum s))."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "router_core._fastpath",
    "The forward hop's hot loop in C; see router_core/fastpath.py.", -1, methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) { return PyModule_Create(&module); }
