/* echo_engine: a Switchboard engine in C on libzmq, written from docs/protocol.md alone.
 *
 * Each GENERATE is answered one token a step (a step every 5 ms while anything runs),
 * echoing the prompt's ids once: at most max_new_tokens, ending at the prompt's end with
 * {"type": "stop", "matched": nil}, or earlier by the built-in engine's stop rules
 * (switchboard/engine/stopping.py). EMBED is answered at once with 8 floats. ABORT,
 * PAUSE (abort / retract / in_place), CONTINUE and FREEZE_GC are applied; every pause and
 * continue is acknowledged; every ENGINE_COMMAND is answered once with a COMMAND_REPLY
 * (flush_cache: no cache to drop, refused while requests run unpaused; any other name:
 * unknown_command); LOAD goes out at start, every 0.5 s and after each operation.
 *
 * Sockets (protocol.md 1.3): a PULL bound on the inbound endpoint, a PUSH connected to
 * the router's engine_events ("events"), one to the detokenizer router's inbound
 * ("outputs"). Section numbers below are docs/protocol.md's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "mpack_lite.h"

enum { K_GENERATE = 1, K_EMBED = 2, K_ABORT = 3, K_PAUSE = 20, K_CONTINUE = 21, K_ACK = 23,
       K_COMMAND_REPLY = 24, K_FREEZE_GC = 30, K_LOAD = 31, K_ENGINE_COMMAND = 32,
       K_TOKEN_BATCH = 40, K_EMBEDDING_BATCH = 42, K_IDLE = 43 };

#define MAX_RUNNING 256            /* LOAD max_running; one more is an abort row */
#define MAX_ROWS 4096              /* rows per batch message (2.1) */
#define MAX_FRAME_BYTES (64 << 20) /* ZMQ_MAXMSGSIZE of a bound socket (2.1) */
#define HWM 10000                  /* SNDHWM and RCVHWM (1.6) */
#define BACKLOG 1000               /* messages waiting per PUSH in front of ZeroMQ (1.7) */
#define BUDGET 512                 /* inbound messages read per loop turn */
#define STEP_NS 5000000LL
#define LOAD_NS 500000000LL
#define PROMPT_HEAD 5              /* prompt ids ahead of the output in decode_ids (3.6) */
#define STOP_TAIL_SLACK 4          /* stopping.py: tail tokens beyond the longest stop */
#define EMBED_DIM 8
#define MAX_PROMPT (1 << 20)       /* one request's bounds; beyond, an abort row */
#define MAX_STOPS 64
#define MAX_STOP_BYTES 1024
#define MAX_STOP_IDS 4096
#define NAMED_RIDS 8               /* request ids a conflict names before it counts the rest */

#define COUNTERS(X) \
    X(RX_GENERATE, "received{generate}") X(RX_EMBED, "received{embed}") \
    X(RX_ABORT, "received{abort}") X(RX_PAUSE, "received{pause}") \
    X(RX_CONTINUE, "received{continue}") X(RX_FREEZE, "received{freeze_gc}") \
    X(RX_COMMAND, "received{engine_command}") \
    X(TX_TOKEN, "sent{token_batch}") X(TX_EMBED, "sent{embedding_batch}") \
    X(TX_ACK, "sent{ack}") X(TX_LOAD, "sent{load}") X(TX_FREEZE, "sent{freeze_gc}") \
    X(TX_REPLY, "sent{command_reply}") \
    X(BAD_HEADER, "rejected{bad_header}") X(HEADER_SHAPE, "rejected{header_shape}") \
    X(FRAME_COUNT, "rejected{frame_count}") X(TOO_MANY, "rejected{too_many_frames}") \
    X(UNEXPECTED, "rejected{unexpected_kind}") X(BAD_PAYLOAD, "rejected{bad_payload}") \
    X(RID_MISMATCH, "rejected{rid_mismatch}") X(QUEUE_FULL, "rejected{queue_full}") \
    X(TOO_LARGE, "rejected{too_large}") X(DUP_OP, "duplicates{operation}") \
    X(DUP_REQ, "duplicates{request}") X(DROP_BACKLOG, "dropped{backlog_full}") \
    X(DROP_SEND, "dropped{send_failed}") X(DROP_CLOSED, "dropped{closed}") \
    X(DROP_OOM, "dropped{out_of_memory}")
#define AS_ENUM(id, name) C_##id,
#define AS_NAME(id, name) name,
enum { COUNTERS(AS_ENUM) C_COUNT };
static const char *const counter_names[C_COUNT] = { COUNTERS(AS_NAME) };
static unsigned long long counters[C_COUNT];

/* The vocabulary file, format switchboard-vocab/1 (contract of issue 22). */
static struct {
    char *file;          /* the whole file: token bytes point into it */
    uint32_t size;       /* vocab_size */
    const char **tok;    /* tokens[id], tok_len[id] bytes */
    uint32_t *tok_len;
    uint8_t *flags;      /* per id: SPECIAL, EOG */
    int strip_leading_space;
} V;
enum { SPECIAL = 1, EOG = 2 };

typedef struct {         /* a request: its owner, prompt, output so far and limits */
    char *rid, *owner, *trace; /* trace: the request's traceparent, "" for none */
    int64_t *prompt, *out;
    uint32_t n_prompt, n_out;
    int64_t max_new, min_new, holdback;
    int64_t *stop_ids;
    uint32_t n_stop_ids, n_stops, window;
    char **stops;
    uint32_t *stop_len;
    int ignore_eos, skip_special, spaces_between, no_stop_trim;
} req_t;

enum { F_NONE, F_LENGTH, F_STOP_ID, F_STOP_STR, F_STOP_NIL, F_ABORT };
typedef struct {
    int kind;
    int64_t n;           /* the length, or the stop id */
    const char *text;    /* the stop string or the abort message */
    size_t len;
    const char *err_type; /* an abort with status_code 503: a fault (3.6, 5.12) */
} finish_t;

static finish_t fin(int kind, int64_t n, const char *text, size_t len)
{
    return (finish_t){ kind, n, text, len, NULL };
}

typedef struct outmsg {  /* a message waiting in a PUSH's backlog */
    struct outmsg *next;
    int n;
    mp_buf f[];
} outmsg;
typedef struct {
    void *sock;
    outmsg *head, *tail;
    int queued;
} pusher;

static volatile sig_atomic_t stopping;
static req_t *running[MAX_RUNNING];
static int n_running, paused, retracted;
static char *last_op[2];  /* the newest ordered operation applied: incarnation, seq (3.4) */
static const char *key = "";
static long long steps, started_ns;
static pusher events, outputs;
static mp_buf scratch_bytes, scratch_text, scratch_prior;

#define KEY(lit) mp_key_is(k, n, lit)
#define SAME(s, len, p, plen) ((len) == (plen) && memcmp(s, p, len) == 0)

static void on_signal(int sig) { (void)sig; stopping = 1; }

static long long now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("echo_engine: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n), d[n] = 0;
    return d;
}

/* ---------------------------------------------------------------- sending */

static int try_send(void *sock, outmsg *m)
{
    for (int k = 0; k < m->n; k++) {
        int more = k + 1 < m->n ? ZMQ_SNDMORE : 0;
        if (zmq_send(sock, m->f[k].d, m->f[k].n, ZMQ_DONTWAIT | more) < 0)
            /* Only the first frame can meet EAGAIN: ZeroMQ takes the rest with it (1.8). */
            return k == 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }
    return 1;
}

static void free_msg(outmsg *m)
{
    for (int k = 0; k < m->n; k++)
        mp_buf_free(&m->f[k]);
    free(m);
}

static outmsg *new_msg(int frames)
{
    outmsg *m = calloc(1, sizeof *m + (size_t)frames * sizeof(mp_buf));
    if (m)
        m->n = frames;
    else
        counters[C_DROP_OOM]++;
    return m;
}

static void flush(pusher *p)
{
    int sent;
    while (p->head && (sent = try_send(p->sock, p->head)) != 0) {
        outmsg *m = p->head;
        counters[C_DROP_SEND] += sent < 0;
        if (!(p->head = m->next))
            p->tail = NULL;
        p->queued--;
        free_msg(m);
    }
}

/* Send now, or queue behind what waits; never blocks (1.7). Takes ownership of m. */
static void send_msg(pusher *p, outmsg *m, int counter)
{
    int sent = -1;
    for (int k = 0; k < m->n; k++)
        if (m->f[k].oom)
            sent = -2;
    if (sent == -2) {
        counters[C_DROP_OOM]++;
    } else {
        counters[counter]++;
        flush(p);
        sent = p->head ? 0 : try_send(p->sock, m);
        counters[C_DROP_SEND] += sent < 0;
    }
    if (sent == 0 && p->queued < BACKLOG) {
        m->next = NULL;
        *(p->tail ? &p->tail->next : &p->head) = m;
        p->tail = m;
        p->queued++;
        return;
    }
    counters[C_DROP_BACKLOG] += sent == 0;
    free_msg(m);
}

/* The canonical header (2.2): [kind, rids, reply_to, sent_ns, "", "", row_traces]. */
static void w_header(mp_buf *w, int kind, req_t *const *rows, int n)
{
    int traced = 0;
    mp_w_array(w, 7);
    mp_w_int(w, kind);
    mp_w_array(w, (uint32_t)n);
    for (int i = 0; i < n; i++)
        mp_w_cstr(w, rows[i]->rid), traced |= rows[i]->trace[0] != 0;
    mp_w_array(w, (uint32_t)n);
    for (int i = 0; i < n; i++)
        mp_w_cstr(w, rows[i]->owner);
    mp_w_int(w, now_ns(CLOCK_REALTIME));
    mp_w_cstr(w, "");
    mp_w_cstr(w, "");
    mp_w_array(w, traced ? (uint32_t)n : 0); /* [] unless a row is traced (2.3) */
    for (int i = 0; traced && i < n; i++)
        mp_w_cstr(w, rows[i]->trace);
}

static void w_finish(mp_buf *w, const finish_t *f)
{
    static const char *const types[] = { "", "length", "stop", "stop", "stop", "abort" };
    if (f->kind == F_NONE) {
        mp_w_nil(w);
        return;
    }
    mp_w_map(w, f->err_type ? 4 : 2);
    mp_w_cstr(w, "type"), mp_w_cstr(w, types[f->kind]);
    mp_w_cstr(w, f->kind == F_LENGTH ? "length" : f->kind == F_ABORT ? "message" : "matched");
    if (f->kind == F_LENGTH || f->kind == F_STOP_ID)
        mp_w_int(w, f->n);
    else if (f->kind == F_STOP_NIL)
        mp_w_nil(w);
    else
        mp_w_str(w, f->text, f->len);
    if (f->err_type) {
        mp_w_cstr(w, "status_code"), mp_w_int(w, 503);
        mp_w_cstr(w, "err_type"), mp_w_cstr(w, f->err_type);
    }
}

/* A key and the one-entry array of its column (4.1). */
static mp_buf *col(mp_buf *w, const char *k)
{
    mp_w_cstr(w, k);
    mp_w_array(w, 1);
    return w;
}

/* One BatchTokenIDOutput row; new_id: it carries the newest output id (not an abort). */
static void w_token_row(mp_buf *w, const req_t *q, const finish_t *f, int new_id)
{
    uint32_t head = q->n_prompt < PROMPT_HEAD ? q->n_prompt : PROMPT_HEAD;
    mp_w_map(w, 13);
    mp_w_cstr(col(w, "rids"), q->rid);
    mp_w_cstr(col(w, "http_worker_ipcs"), q->owner);
    w_finish(col(w, "finished_reasons"), f);
    mp_w_int(col(w, "prompt_tokens"), q->n_prompt);
    mp_w_int(col(w, "cached_tokens"), 0);
    /* Only this row's new id: the row starts at completion_tokens - len(output_ids) (3.7). */
    mp_w_int(col(w, "completion_tokens"), q->n_out);
    mp_w_array(col(w, "output_ids"), (uint32_t)new_id);
    if (new_id)
        mp_w_int(w, q->out[q->n_out - 1]);
    /* The prompt's last ids, then every output id; read_offsets: where the output starts.
     * The detokenizer decodes the output as the text that continues them (3.6). */
    mp_w_array(col(w, "decode_ids"), head + q->n_out);
    for (uint32_t i = q->n_prompt - head; i < q->n_prompt; i++)
        mp_w_int(w, q->prompt[i]);
    for (uint32_t i = 0; i < q->n_out; i++)
        mp_w_int(w, q->out[i]);
    mp_w_int(col(w, "read_offsets"), head);
    mp_w_bool(col(w, "skip_special_tokens"), q->skip_special);
    mp_w_bool(col(w, "spaces_between_special_tokens"), q->spaces_between);
    mp_w_bool(col(w, "no_stop_trim"), q->no_stop_trim);
    mp_w_int(col(w, "stop_holdback"), q->holdback);
}

/* TOKEN_BATCH messages of at most MAX_ROWS rows: the header, then a frame a row (4.1). */
static void send_token_rows(req_t *const *rows, const finish_t *fins, int n, int new_ids)
{
    for (int at = 0; at < n; at += MAX_ROWS) {
        int chunk = n - at < MAX_ROWS ? n - at : MAX_ROWS;
        outmsg *m = new_msg(1 + chunk);
        if (!m)
            continue;
        w_header(&m->f[0], K_TOKEN_BATCH, rows + at, chunk);
        for (int i = 0; i < chunk; i++)
            w_token_row(&m->f[1 + i], rows[at + i], &fins[at + i], new_ids);
        send_msg(&outputs, m, C_TX_TOKEN);
    }
}

static void send_abort_row(req_t *q, const char *message, const char *err_type)
{
    finish_t f = { F_ABORT, 0, message, strlen(message), err_type };
    send_token_rows(&q, &f, 1, 0);
}

/* One payload after an empty header: ACK and LOAD to events, FREEZE_GC to outputs. */
static void send_plain(pusher *p, int kind, mp_buf *payload, int counter)
{
    outmsg *m = new_msg(2);
    if (!m) {
        mp_buf_free(payload);
        return;
    }
    w_header(&m->f[0], kind, NULL, 0);
    m->f[1] = *payload;
    send_msg(p, m, counter);
}

static void send_ack(const char *op_id, uint32_t len)
{
    mp_buf w = { 0 };
    mp_w_map(&w, 3);
    mp_w_cstr(&w, "op_id"), mp_w_str(&w, op_id, len);
    mp_w_cstr(&w, "participant"), mp_w_cstr(&w, "engine");
    mp_w_cstr(&w, "secret"), mp_w_cstr(&w, key); /* the stack key (5.14) */
    send_plain(&events, K_ACK, &w, C_TX_ACK);
}

static void send_load(void)
{
    mp_buf w = { 0 };
    mp_w_map(&w, 9);
    mp_w_cstr(&w, "running"), mp_w_int(&w, retracted ? 0 : n_running);
    mp_w_cstr(&w, "waiting"), mp_w_int(&w, retracted ? n_running : 0);
    mp_w_cstr(&w, "max_running"), mp_w_int(&w, MAX_RUNNING);
    mp_w_cstr(&w, "token_usage"), mp_w_f64(&w, (double)n_running / MAX_RUNNING);
    mp_w_cstr(&w, "step"), mp_w_int(&w, steps);
    mp_w_cstr(&w, "taken_ns"), mp_w_int(&w, now_ns(CLOCK_REALTIME));
    mp_w_cstr(&w, "engine_started_ns"), mp_w_int(&w, started_ns);
    mp_w_cstr(&w, "features"), mp_w_array(&w, 0);
    mp_w_cstr(&w, "secret"), mp_w_cstr(&w, key);
    send_plain(&events, K_LOAD, &w, C_TX_LOAD);
}

/* ---------------------------------------------------------------- requests */

/* Bytes as text: invalid UTF-8 becomes U+FFFD, one per maximal bad subpart (as Python),
 * appended to out unless it is NULL. Returns the number of bad subparts. */
static size_t utf8_lossy(const uint8_t *s, size_t n, mp_buf *out)
{
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i], lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        uint8_t hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        size_t need = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                      : c >= 0xf0 && c <= 0xf4 ? 3 : 9, k = 1;
        for (; need < 9 && k <= need && i + k < n; k++)
            if (s[i + k] < (k == 1 ? lo : 0x80) || s[i + k] > (k == 1 ? hi : 0xbf))
                break;
        int ok = need < 9 && k > need;
        if (out)
            mp_w_raw(out, ok ? (const char *)s + i : "\xef\xbf\xbd", ok ? need + 1 : 3);
        bad += !ok;
        i += ok ? need + 1 : k;
    }
    return bad;
}

/* A str read from a payload that goes back out: it must be UTF-8, as Python's decoder
 * (and the one of whoever reads it next) wants (3.1). */
static int read_text(mp_reader *r, const char **s, uint32_t *n)
{
    if (mp_read_str(r, s, n) && utf8_lossy((const uint8_t *)*s, *n, NULL))
        r->err = 1;
    return !r->err;
}

static void free_stops(req_t *q)
{
    for (uint32_t i = 0; i < q->n_stops; i++)
        free(q->stops[i]);
    free(q->stops), free(q->stop_len);
    q->stops = NULL, q->stop_len = NULL, q->n_stops = 0;
}

static void free_req(req_t *q)
{
    if (!q)
        return;
    free_stops(q);
    free(q->stop_ids), free(q->prompt), free(q->out);
    free(q->rid), free(q->owner), free(q->trace);
    free(q);
}

/* An array<int> into *ids (a key given twice: the last wins); longer than max is skipped
 * and flagged. */
static int read_ids(mp_reader *r, int64_t **ids, uint32_t *n, uint32_t max, int *too_large)
{
    uint32_t count;
    free(*ids);
    *ids = NULL, *n = 0;
    if (!mp_read_array(r, &count))
        return 0;
    if (count > max) {
        *too_large = 1;
        for (uint32_t i = 0; i < count && mp_skip(r); i++)
            ;
        return !r->err;
    }
    if (!(*ids = calloc(count ? count : 1, sizeof **ids))) {
        r->err = 1;
        return 0;
    }
    for (; *n < count && mp_read_int(r, &(*ids)[*n]); (*n)++)
        ;
    return !r->err;
}

static void read_stops(mp_reader *r, req_t *q, int *too_large)
{
    uint32_t count, longest = 0, longest_bytes = 0, len;
    const char *s;
    free_stops(q);
    if (!mp_read_array(r, &count))
        return;
    q->stops = calloc(count ? count : 1, sizeof *q->stops);
    q->stop_len = calloc(count ? count : 1, sizeof *q->stop_len);
    r->err |= !q->stops || !q->stop_len; /* out of memory: refused as it cannot be read */
    for (uint32_t i = 0; i < count && read_text(r, &s, &len); i++) {
        if (len == 0) /* the built-in engine drops empty stop strings */
            continue;
        if (q->n_stops >= MAX_STOPS || len > MAX_STOP_BYTES) {
            *too_large = 1;
            continue;
        }
        if (!(q->stops[q->n_stops] = dup_n(s, len))) {
            r->err = 1;
            return;
        }
        q->stop_len[q->n_stops++] = len;
        uint32_t chars = 0; /* in characters, as Python's len() */
        for (uint32_t b = 0; b < len; b++)
            chars += ((uint8_t)s[b] & 0xc0) != 0x80;
        longest = chars > longest ? chars : longest;
        longest_bytes = len > longest_bytes ? len : longest_bytes;
    }
    q->holdback = longest ? longest - 1 : 0; /* stop_holdback (3.6) */
    q->window = longest_bytes + STOP_TAIL_SLACK; /* each id adds a byte at least (3.9) */
}

static void read_sampling(mp_reader *r, req_t *q, int *too_large)
{
    uint32_t left, n;
    const char *k;
    if (!mp_read_map(r, &left))
        return;
    while (mp_map_key(r, &left, &k, &n)) {
        if (KEY("max_new_tokens"))
            mp_read_int(r, &q->max_new);
        else if (KEY("min_new_tokens"))
            mp_read_int(r, &q->min_new);
        else if (KEY("stop"))
            read_stops(r, q, too_large);
        else if (KEY("stop_token_ids"))
            read_ids(r, &q->stop_ids, &q->n_stop_ids, MAX_STOP_IDS, too_large);
        else if (KEY("ignore_eos"))
            mp_read_bool(r, &q->ignore_eos);
        else if (KEY("skip_special_tokens"))
            mp_read_bool(r, &q->skip_special);
        else if (KEY("spaces_between_special_tokens"))
            mp_read_bool(r, &q->spaces_between);
        else if (KEY("no_stop_trim"))
            mp_read_bool(r, &q->no_stop_trim);
        else
            mp_skip(r); /* what an echo does not sample with, and unknown keys (3.1) */
    }
}

/* A GENERATE or EMBED payload (3.2): rid and input_ids required, the rest defaulted. */
static int read_request(mp_reader *r, req_t *q, int generate, const char **rid,
                        uint32_t *rid_len, int *too_large)
{
    uint32_t left, n;
    const char *k;
    int have_ids = 0;
    *rid = NULL;
    q->max_new = 128, q->skip_special = 1, q->spaces_between = 1;
    q->window = STOP_TAIL_SLACK;
    if (!mp_read_map(r, &left))
        return 0;
    while (mp_map_key(r, &left, &k, &n)) {
        if (KEY("rid"))
            mp_read_str(r, rid, rid_len);
        else if (KEY("input_ids"))
            have_ids = read_ids(r, &q->prompt, &q->n_prompt, MAX_PROMPT, too_large);
        else if (generate && KEY("sampling_params"))
            read_sampling(r, q, too_large);
        else
            mp_skip(r);
    }
    return !r->err && r->p == r->end && *rid && have_ids;
}

static int find_running(const char *owner, const char *rid, size_t rid_len)
{
    for (int i = 0; i < n_running; i++)
        if (!strcmp(running[i]->owner, owner) &&
            SAME(running[i]->rid, strlen(running[i]->rid), rid, rid_len))
            return i;
    return -1;
}

static void remove_running(int i)
{
    free_req(running[i]);
    memmove(running + i, running + i + 1, (size_t)(n_running - i - 1) * sizeof *running);
    n_running--;
}

static void embed(req_t *q)
{
    outmsg *m = new_msg(2);
    finish_t f = fin(F_STOP_NIL, 0, NULL, 0); /* as the built-in engine answers */
    if (!m)
        return;
    mp_buf *w = &m->f[1];
    w_header(&m->f[0], K_EMBEDDING_BATCH, &q, 1);
    mp_w_map(w, 6);
    mp_w_cstr(col(w, "rids"), q->rid);
    mp_w_cstr(col(w, "http_worker_ipcs"), q->owner);
    w_finish(col(w, "finished_reasons"), &f);
    mp_w_int(col(w, "prompt_tokens"), q->n_prompt);
    mp_w_int(col(w, "cached_tokens"), 0);
    mp_w_array(col(w, "embeddings"), EMBED_DIM);
    /* v[k] in [-1, 1): FNV-1a over k and every id's 8 little-endian bytes. */
    for (int k = 0; k < EMBED_DIM; k++) {
        uint64_t h = 14695981039346656037ULL ^ (uint64_t)k;
        for (uint32_t i = 0; i < q->n_prompt; i++)
            for (int b = 0; b < 8; b++)
                h = (h ^ (((uint64_t)q->prompt[i] >> (8 * b)) & 0xff)) * 1099511628211ULL;
        mp_w_f64(w, (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    send_msg(&outputs, m, C_TX_EMBED);
}

static void on_request(int kind, mp_reader *r, const char *hrid, uint32_t hrid_len,
                       const char *owner, uint32_t owner_len, const char *trace,
                       uint32_t trace_len)
{
    req_t *q = calloc(1, sizeof *q);
    const char *rid;
    uint32_t rid_len;
    int too_large = 0;
    if (!q || !read_request(r, q, kind == K_GENERATE, &rid, &rid_len, &too_large))
        counters[C_BAD_PAYLOAD]++;
    else if (!SAME(rid, rid_len, hrid, hrid_len)) /* the router does not check (2.5) */
        counters[C_RID_MISMATCH]++;
    else if (!(q->rid = dup_n(rid, rid_len)) || !(q->owner = dup_n(owner, owner_len)) ||
             !(q->trace = dup_n(trace, trace_len)) ||
             !(q->out = calloc(q->n_prompt ? q->n_prompt : 1, sizeof *q->out)))
        counters[C_DROP_OOM]++;
    else if (find_running(q->owner, rid, rid_len) >= 0)
        counters[C_DUP_REQ]++; /* still open: a worker re-sent it (5.11) */
    else if (too_large) {
        counters[C_TOO_LARGE]++;
        send_abort_row(q, "the request is beyond the echo engine's bounds (prompt ids, stop "
                          "strings or stop token ids)", NULL);
    } else if (kind == K_EMBED) {
        embed(q);
    } else if (n_running >= MAX_RUNNING) {
        counters[C_QUEUE_FULL]++;
        send_abort_row(q, "the echo engine is full (256 running); retry later",
                       "engine_queue_full");
    } else if (q->n_prompt == 0) {
        finish_t f = fin(F_STOP_NIL, 0, NULL, 0); /* nothing to echo */
        send_token_rows(&q, &f, 1, 0);
    } else {
        q->max_new = q->max_new < 1 ? 1 : q->max_new; /* as the built-in engine */
        running[n_running++] = q;
        return;
    }
    free_req(q);
}

/* Finish with an abort row (no new ids) the running requests of owner (every one with
 * owner NULL): all of them, or the one of rid. */
static void abort_rows(const char *owner, uint32_t owner_len, int all, const char *rid,
                       uint32_t rid_len, const char *reason, uint32_t reason_len)
{
    req_t *rows[MAX_RUNNING];
    finish_t fins[MAX_RUNNING];
    int n = 0;
    for (int i = 0; i < n_running; i++) {
        req_t *q = running[i];
        if ((!owner || SAME(q->owner, strlen(q->owner), owner, owner_len)) &&
            (all || SAME(q->rid, strlen(q->rid), rid, rid_len))) {
            fins[n] = fin(F_ABORT, 0, reason, reason_len);
            rows[n++] = q;
        }
    }
    send_token_rows(rows, fins, n, 0);
    for (int i = n_running - 1; i >= 0; i--)
        for (int j = 0; j < n; j++)
            if (running[i] == rows[j]) {
                remove_running(i);
                break;
            }
}

static void on_abort(mp_reader *r, const char *hrid, uint32_t hrid_len, const char *owner,
                     uint32_t owner_len)
{
    const char *rid = "", *reason = "client", *k;
    uint32_t rid_len = 0, reason_len = 6, left, n;
    int all = 0;
    if (mp_read_map(r, &left))
        while (mp_map_key(r, &left, &k, &n)) {
            if (KEY("rid"))
                mp_read_str(r, &rid, &rid_len);
            else if (KEY("abort_all"))
                mp_read_bool(r, &all);
            else if (KEY("reason"))
                read_text(r, &reason, &reason_len);
            else
                mp_skip(r);
        }
    if (r->err || r->p != r->end)
        counters[C_BAD_PAYLOAD]++;
    else if (hrid && !SAME(rid, rid_len, hrid, hrid_len))
        counters[C_RID_MISMATCH]++;
    else
        abort_rows(owner, owner_len, all, rid, rid_len, reason, reason_len);
}

/* Decimal strings compared as the integers they are, whatever their length. */
static int cmp_decimal(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b);
    for (; an > 1 && *a == '0'; a++, an--)
        ;
    for (; bn > 1 && *b == '0'; b++, bn--)
        ;
    return an != bn ? (an < bn ? -1 : 1) : memcmp(a, b, an);
}

static int digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return n > 0;
}

/* Whether to apply op_id (3.4): "<incarnation>-<seq>" newer than the last one applied, in
 * (incarnation, seq) order; an id without that shape is applied and orders nothing. */
static int admit_op(const char *id, uint32_t n)
{
    const char *dash = memrchr(id, '-', n);
    size_t hn = dash ? (size_t)(dash - id) : 0, tn = n - hn - 1;
    if (!dash || !digits(id, hn) || !digits(dash + 1, tn))
        return 1;
    int c = last_op[0] ? cmp_decimal(id, hn, last_op[0]) : 1;
    if (c < 0 || (c == 0 && cmp_decimal(dash + 1, tn, last_op[1]) <= 0))
        return 0;
    char *head = dup_n(id, hn), *tail = dup_n(dash + 1, tn);
    if (head && tail) {
        free(last_op[0]), free(last_op[1]);
        last_op[0] = head, last_op[1] = tail;
    } else {
        free(head), free(tail);
    }
    return 1;
}

static void on_command(int kind, mp_reader *r)
{
    const char *op = NULL, *mode = "abort", *k;
    uint32_t op_len = 0, mode_len = 5, left, n;
    if (mp_read_map(r, &left))
        while (mp_map_key(r, &left, &k, &n)) {
            if (KEY("op_id"))
                read_text(r, &op, &op_len);
            else if (kind == K_PAUSE && KEY("mode"))
                mp_read_str(r, &mode, &mode_len);
            else
                mp_skip(r);
        }
    int abort = mp_key_is(mode, mode_len, "abort");
    int retract = mp_key_is(mode, mode_len, "retract");
    if (r->err || r->p != r->end || !op ||
        !(abort || retract || mp_key_is(mode, mode_len, "in_place"))) {
        counters[C_BAD_PAYLOAD]++;
        return;
    }
    if (!admit_op(op, op_len)) {
        counters[C_DUP_OP]++; /* no newer than the last applied: acknowledged only */
    } else if (kind == K_PAUSE) {
        if (abort)
            abort_rows(NULL, 0, 1, NULL, 0, "paused", 6);
        /* retract and in_place keep every request (no cache to free) and stop stepping */
        paused = 1, retracted = retract;
    } else {
        paused = retracted = 0;
    }
    send_ack(op, op_len); /* once applied (5.7) */
    send_load();
}

static void w_text(mp_buf *w, const char *s) { mp_w_raw(w, s, strlen(s)); }

/* COMMAND_REPLY (3.11) on events: ok with flush_cache's result, else code and message. */
static void send_reply(const char *op, uint32_t op_len, const char *code, const mp_buf *message)
{
    mp_buf w = { 0 };
    w.oom = message->oom; /* a sentence cut short is not sent */
    mp_w_map(&w, code ? 5 : 4);
    mp_w_cstr(&w, "op_id"), mp_w_str(&w, op, op_len);
    mp_w_cstr(&w, "ok"), mp_w_bool(&w, !code);
    if (code) {
        mp_w_cstr(&w, "code"), mp_w_cstr(&w, code);
        mp_w_cstr(&w, "message"), mp_w_str(&w, (const char *)message->d, message->n);
    } else {
        mp_w_cstr(&w, "result"), mp_w_map(&w, 2);
        mp_w_cstr(&w, "flushed"), mp_w_bool(&w, 1);
        mp_w_cstr(&w, "dropped_tokens"), mp_w_int(&w, 0); /* no cache here */
    }
    mp_w_cstr(&w, "secret"), mp_w_cstr(&w, key); /* the stack key, as on every event */
    send_plain(&events, K_COMMAND_REPLY, &w, C_TX_REPLY);
}

/* flush_cache's arguments: {"timeout_s": a number, 0 < t <= 600}, nothing else. Returns
 * NULL, or why they do not fit (the reply's bad_arguments message). */
static const char *flush_cache_args(mp_reader *r)
{
    uint32_t left, n;
    const char *k, *why = NULL;
    if (!mp_read_map(r, &left))
        return NULL; /* not a map: the payload is bad */
    while (mp_map_key(r, &left, &k, &n)) {
        mp_obj o = { 0 };
        mp_reader value = *r; /* a look at the value's tag; the whole value is skipped */
        int number = mp_next(&value, &o) && (o.type == MP_INT || o.type == MP_UINT ||
                                             o.type == MP_FLOAT);
        double t = o.type == MP_INT ? (double)o.i : o.type == MP_UINT ? (double)o.u : o.f;
        mp_skip(r);
        if (why)
            continue; /* the first problem says enough */
        if (!KEY("timeout_s"))
            why = "flush_cache takes only timeout_s";
        else if (!number)
            why = "timeout_s must be a number of seconds";
        else if (!(t > 0 && t <= 600))
            why = "timeout_s must be above 0 and at most 600";
    }
    return why;
}

/* ENGINE_COMMAND (3.11): answered exactly once, whatever it names; one whose payload does
 * not decode has no op_id to answer and is counted instead. */
static void on_engine_command(mp_reader *r)
{
    const char *op = NULL, *name = NULL, *k, *why = NULL;
    uint32_t op_len = 0, name_len = 0, left, n;
    mp_buf message = { 0 };
    if (mp_read_map(r, &left))
        while (mp_map_key(r, &left, &k, &n)) {
            if (KEY("op_id"))
                read_text(r, &op, &op_len);
            else if (KEY("command"))
                read_text(r, &name, &name_len);
            else if (KEY("args"))
                why = flush_cache_args(r); /* flush_cache's; used only for that name */
            else
                mp_skip(r);
        }
    if (r->err || r->p != r->end || !op || !name) {
        counters[C_BAD_PAYLOAD]++;
        return;
    }
    if (!mp_key_is(name, name_len, "flush_cache")) {
        w_text(&message, "the echo engine does not carry out '");
        mp_w_raw(&message, name, name_len);
        w_text(&message, "' (it knows flush_cache)");
        send_reply(op, op_len, "unknown_command", &message);
    } else if (why) {
        w_text(&message, why);
        send_reply(op, op_len, "bad_arguments", &message);
    } else if (n_running && !paused) { /* dropping the cache now would lose them (3.11) */
        char count[48];
        snprintf(count, sizeof count, "%d requests are running (", n_running);
        w_text(&message, count);
        for (int i = 0; i < n_running && i < NAMED_RIDS; i++)
            w_text(&message, i ? ", " : ""), w_text(&message, running[i]->rid);
        snprintf(count, sizeof count, " and %d more", n_running - NAMED_RIDS);
        w_text(&message, n_running > NAMED_RIDS ? count : "");
        w_text(&message, "); pause generation or let them finish first");
        send_reply(op, op_len, "conflict", &message);
    } else {
        send_reply(op, op_len, NULL, &message); /* no cache: nothing to drop */
    }
    mp_buf_free(&message);
}

/* ---------------------------------------------------------------- inbound */

typedef struct {
    int64_t kind;
    uint32_t n_rids, n_reply, n_traces;
    const char *rid, *reply, *trace; /* the first rid and reply_to; the traceparent */
    uint32_t rid_len, reply_len, trace_len;
} header_t;

static void read_strs(mp_reader *r, uint32_t *count, const char **first, uint32_t *len)
{
    const char *s;
    uint32_t n;
    if (mp_read_array(r, count))
        for (uint32_t i = 0; i < *count && mp_read_str(r, &s, &n); i++)
            if (i == 0 && first)
                *first = s, *len = n;
}

/* The header (2.2): an array of 1 to 7 elements (more: the extra ones are ignored). */
static int read_header(zmq_msg_t *frame, header_t *h)
{
    static const int kinds[] = { 1, 2, 3, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24, 30,
                                 31, 32, 40, 41, 42, 43 };
    mp_reader r;
    mp_obj o;
    uint32_t n, len;
    const char *s;
    int known = 0;
    memset(h, 0, sizeof *h);
    h->trace = "";
    mp_reader_init(&r, zmq_msg_data(frame), zmq_msg_size(frame));
    if (!mp_read_array(&r, &n) || n == 0 || !mp_read_int(&r, &h->kind))
        return 0;
    if (n > 1)
        read_strs(&r, &h->n_rids, &h->rid, &h->rid_len);
    if (n > 2)
        read_strs(&r, &h->n_reply, &h->reply, &h->reply_len);
    if (n > 3 && mp_next(&r, &o) && o.type != MP_INT && o.type != MP_UINT)
        r.err = 1; /* sent_ns: any integer */
    if (n > 4)
        mp_read_str(&r, &h->trace, &h->trace_len);
    if (n > 5)
        mp_read_str(&r, &s, &len); /* tracestate */
    if (n > 6)
        read_strs(&r, &h->n_traces, NULL, NULL);
    for (uint32_t i = 7; i < n && mp_skip(&r); i++)
        ;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        known |= kinds[i] == h->kind;
    return !r.err && r.p == r.end && known;
}

/* The shape rules (2.5). */
static int header_shape_ok(const header_t *h)
{
    int batch = h->kind >= K_TOKEN_BATCH && h->kind <= K_EMBEDDING_BATCH;
    return (h->kind == K_ABORT || h->n_rids == h->n_reply) &&
           ((h->kind != K_GENERATE && h->kind != K_EMBED) || h->n_rids == 1) &&
           (h->kind != K_ABORT || (h->n_reply == 1 && h->n_rids <= 1)) &&
           (!batch || h->n_rids > 0) && (h->kind != K_IDLE || h->n_rids == 0) &&
           (h->n_traces == 0 || (batch && h->n_traces == h->n_rids));
}

/* Why a message is refused (a counter), in the order of engine.md section 4; -1: none. */
static int refusal(zmq_msg_t *frames, int count, header_t *h)
{
    if (count > 1 + MAX_ROWS)
        return C_TOO_MANY;
    if (!read_header(&frames[0], h))
        return C_BAD_HEADER;
    if (!header_shape_ok(h))
        return C_HEADER_SHAPE;
    int batch = h->kind >= K_TOKEN_BATCH && h->kind <= K_EMBEDDING_BATCH;
    if (count != (batch ? 1 + (long)h->n_rids : h->kind == K_IDLE ? 1 : 2))
        return C_FRAME_COUNT;
    switch (h->kind) {
    case K_GENERATE: case K_EMBED: case K_ABORT: case K_PAUSE: case K_CONTINUE: case K_FREEZE_GC:
    case K_ENGINE_COMMAND:
        return -1;
    default: /* a known kind, but not one an engine receives (2.4) */
        return C_UNEXPECTED;
    }
}

static void handle(zmq_msg_t *frames, int count)
{
    header_t h;
    mp_reader r;
    mp_buf w = { 0 };
    uint32_t left, n, reason_len = 0;
    const char *k, *reason = "";
    int refused = refusal(frames, count, &h);
    if (refused >= 0) {
        counters[refused]++;
        return;
    }
    mp_reader_init(&r, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]));
    switch (h.kind) {
    case K_GENERATE: case K_EMBED:
        counters[h.kind == K_GENERATE ? C_RX_GENERATE : C_RX_EMBED]++;
        on_request((int)h.kind, &r, h.rid, h.rid_len, h.reply, h.reply_len, h.trace, h.trace_len);
        break;
    case K_ABORT:
        counters[C_RX_ABORT]++;
        on_abort(&r, h.n_rids ? h.rid : NULL, h.rid_len, h.reply, h.reply_len);
        break;
    case K_PAUSE: case K_CONTINUE:
        counters[h.kind == K_PAUSE ? C_RX_PAUSE : C_RX_CONTINUE]++;
        on_command((int)h.kind, &r);
        break;
    case K_ENGINE_COMMAND:
        counters[C_RX_COMMAND]++;
        on_engine_command(&r);
        break;
    default: /* FREEZE_GC: no collector here (3.5); passed on, so the detokenizers freeze */
        counters[C_RX_FREEZE]++;
        if (mp_read_map(&r, &left))
            while (mp_map_key(&r, &left, &k, &n))
                KEY("reason") ? read_text(&r, &reason, &reason_len) : mp_skip(&r);
        if (r.err || r.p != r.end) {
            counters[C_BAD_PAYLOAD]++;
            break;
        }
        mp_w_map(&w, 1);
        mp_w_cstr(&w, "reason"), mp_w_str(&w, reason, reason_len);
        send_plain(&outputs, K_FREEZE_GC, &w, C_TX_FREEZE);
    }
}

/* Read what waits, at most BUDGET messages; only the first two frames of one are kept. */
static void read_inbound(void *pull)
{
    zmq_msg_t frames[2], part;
    for (int budget = 0; budget < BUDGET; budget++) {
        int count = 0, more = 1;
        while (more) {
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, pull, count ? 0 : ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&part);
                if (count == 0)
                    return; /* nothing waiting */
                if (errno == EINTR)
                    continue; /* the rest is there: ZeroMQ delivers a message whole */
                break;
            }
            more = zmq_msg_more(&part);
            if (count++ < 2)
                frames[count - 1] = part;
            else
                zmq_msg_close(&part);
        }
        handle(frames, count);
        for (int k = 0; k < count && k < 2; k++)
            zmq_msg_close(&frames[k]);
    }
}

/* ---------------------------------------------------------------- stepping */

/* Whether the newest id completes a stop string in the text of the output's last `window`
 * ids (3.9, 3.10), as stopping.py decodes it: the ids' bytes with the special ids left out
 * (whatever the request's skip_special_tokens: the built-in engines decode so), and one
 * leading space dropped for SentencePiece-style vocabularies (a text decoded from its
 * start). A match already whole in the text before the newest id does not count. */
static const char *stop_string_in_tail(const req_t *q, uint32_t *len)
{
    uint32_t from = q->n_out > q->window ? q->n_out - q->window : 0;
    size_t before = 0; /* bytes of the tail's ids before the newest */
    scratch_bytes.n = scratch_text.n = scratch_prior.n = 0;
    for (uint32_t i = from; i < q->n_out; i++) {
        int64_t id = q->out[i];
        if (i + 1 == q->n_out)
            before = scratch_bytes.n;
        if (id >= 0 && id < V.size && !(V.flags[id] & SPECIAL))
            mp_w_raw(&scratch_bytes, V.tok[id], V.tok_len[id]);
    }
    utf8_lossy(scratch_bytes.d, scratch_bytes.n, &scratch_text);
    utf8_lossy(scratch_bytes.d, before, &scratch_prior);
    if (scratch_text.oom || scratch_prior.oom)
        return NULL;
    const char *text = (const char *)scratch_text.d, *prior = (const char *)scratch_prior.d;
    size_t n = scratch_text.n, m = scratch_prior.n;
    if (V.strip_leading_space && n && text[0] == ' ')
        text++, n--;
    if (V.strip_leading_space && m && prior[0] == ' ')
        prior++, m--;
    size_t settled = 0; /* the text the newest id did not change */
    while (settled < n && settled < m && text[settled] == prior[settled])
        settled++;
    for (uint32_t s = 0; n && s < q->n_stops; s++) {
        size_t k = q->stop_len[s];
        for (const char *at = text; (at = memmem(at, n - (size_t)(at - text), q->stops[s], k));
             at++) {
            if ((size_t)(at - text) + k > settled) {
                *len = q->stop_len[s];
                return q->stops[s];
            }
        }
    }
    return NULL;
}

/* stopping.py's order: length; after min_new_tokens a stop id, or an end-of-generation id
 * unless ignore_eos, then a stop string. Then the echo's own end: the prompt is all said. */
static finish_t finish_of(const req_t *q)
{
    int64_t last = q->out[q->n_out - 1];
    uint32_t len;
    const char *stop;
    if (q->n_out >= q->max_new)
        return fin(F_LENGTH, q->max_new, NULL, 0);
    if (q->n_out >= q->min_new) {
        for (uint32_t i = 0; i < q->n_stop_ids; i++)
            if (q->stop_ids[i] == last)
                return fin(F_STOP_ID, last, NULL, 0);
        if (last >= 0 && last < V.size && (V.flags[last] & EOG) && !q->ignore_eos)
            return fin(F_STOP_ID, last, NULL, 0);
        if (q->n_stops && (stop = stop_string_in_tail(q, &len)))
            return fin(F_STOP_STR, 0, stop, len);
    }
    return fin(q->n_out >= q->n_prompt ? F_STOP_NIL : F_NONE, 0, NULL, 0);
}

/* One step: every running request's next id, all in one batch (IDLE is never needed: a
 * step runs only while a request does, and it has a row for each). */
static void step(void)
{
    finish_t fins[MAX_RUNNING];
    steps++;
    for (int i = 0; i < n_running; i++) {
        req_t *q = running[i];
        q->out[q->n_out] = q->prompt[q->n_out];
        q->n_out++;
        fins[i] = finish_of(q);
    }
    send_token_rows(running, fins, n_running, 1);
    for (int i = n_running - 1; i >= 0; i--)
        if (fins[i].kind != F_NONE)
            remove_running(i);
}

/* ---------------------------------------------------------------- start and stop */

static char *read_file(const char *path, size_t *len, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *data = NULL;
    size_t got = 0;
    ssize_t n = 1;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max &&
        (data = malloc((size_t)st.st_size + 1)))
        while (got < (size_t)st.st_size && (n = read(fd, data + got, (size_t)st.st_size - got)) > 0)
            got += (size_t)n;
    if (fd >= 0)
        close(fd);
    if (data && n <= 0)
        free(data), data = NULL;
    if (data)
        data[got] = 0, *len = got;
    return data;
}

static void read_id_flags(mp_reader *r, uint8_t flag)
{
    uint32_t n;
    int64_t id;
    if (mp_read_array(r, &n))
        for (uint32_t i = 0; i < n && mp_read_int(r, &id); i++)
            if (id >= 0 && id < V.size)
                V.flags[id] |= flag;
}

/* Two passes over the map: vocab_size sizes the tables the other keys fill. */
static const char *load_vocab(const char *path)
{
    size_t size;
    mp_reader r;
    mp_obj o;
    uint32_t left, n, tokens = 0;
    int64_t vocab_size = -1;
    int format_ok = 0;
    const char *k;
    if (!(V.file = read_file(path, &size, 1u << 30)))
        return "cannot read it";
    mp_reader_init(&r, V.file, size);
    if (!mp_read_map(&r, &left))
        return "not a MessagePack map";
    while (mp_map_key(&r, &left, &k, &n))
        KEY("vocab_size") ? mp_read_int(&r, &vocab_size) : mp_skip(&r);
    if (r.err || vocab_size < 0 || vocab_size > (1 << 24))
        return "no vocab_size";
    V.size = (uint32_t)vocab_size;
    V.tok = calloc(V.size + 1, sizeof *V.tok);
    V.tok_len = calloc(V.size + 1, sizeof *V.tok_len);
    V.flags = calloc(V.size + 1, 1);
    if (!V.tok || !V.tok_len || !V.flags)
        return "out of memory";
    mp_reader_init(&r, V.file, size);
    mp_read_map(&r, &left);
    while (mp_map_key(&r, &left, &k, &n)) {
        if (KEY("format"))
            format_ok = mp_read(&r, &o, MP_STR) && mp_key_is(o.p, o.n, "switchboard-vocab/1");
        else if (KEY("eog_token_ids"))
            read_id_flags(&r, EOG);
        else if (KEY("special_token_ids"))
            read_id_flags(&r, SPECIAL);
        else if (KEY("strip_leading_space"))
            mp_read_bool(&r, &V.strip_leading_space);
        else if (KEY("eos_token_id")) {
            if (mp_next(&r, &o) && o.type == MP_INT && o.i >= 0 && o.i < V.size)
                V.flags[o.i] |= EOG; /* eog_token_ids has it too; be sure */
        } else if (KEY("tokens")) {
            if (mp_read_array(&r, &tokens) && tokens != V.size)
                return "tokens does not have vocab_size entries";
            for (uint32_t t = 0; t < tokens && mp_next(&r, &o); t++) {
                r.err |= o.type != MP_BIN && o.type != MP_STR;
                V.tok[t] = o.p, V.tok_len[t] = o.n;
            }
        } else {
            mp_skip(&r);
        }
    }
    if (r.err || r.p != r.end)
        return "not a valid vocabulary map";
    return !format_ok ? "format is not switchboard-vocab/1" : tokens != V.size ? "no tokens" : NULL;
}

/* The first line of the key file, stripped; refused if others may read it (5.14). */
static char *read_key(const char *path)
{
    struct stat st;
    size_t len;
    char *text;
    if (stat(path, &st) != 0 || !(text = read_file(path, &len, 4096)))
        die(2, "key file %s: cannot read it", path);
    if ((st.st_mode & 077) || st.st_uid != getuid())
        die(2, "key file %s: must be yours and unreadable by group and others (chmod 600)", path);
    text[strcspn(text, "\r\n")] = 0;
    char *start = text + strspn(text, " \t");
    size_t n = strlen(start);
    for (; n && (start[n - 1] == ' ' || start[n - 1] == '\t'); n--)
        ;
    memmove(text, start, n);
    text[n] = 0;
    return text;
}

/* ipc://, inproc://, or tcp:// on a loopback host (1.5). */
static int endpoint_ok(const char *e)
{
    if (!strncmp(e, "ipc://", 6) || !strncmp(e, "inproc://", 9))
        return e[6] != 0;
    return !strncmp(e, "tcp://127.", 10) || !strncmp(e, "tcp://localhost:", 16) ||
           !strncmp(e, "tcp://[::1]:", 12);
}

/* A live process accepts on this ipc path: libzmq's bind would silently take it (1.9). */
static int ipc_in_use(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    int fd = strlen(path) < sizeof a.sun_path ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
    if (fd < 0)
        return 0;
    strcpy(a.sun_path, path);
    int used = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return used;
}

/* Whether the supervisor (SWITCHBOARD_PARENT_PID) is still this process's parent, or its
 * grandparent through a wrapper that did not exec (sh -c '...; ./echo_engine'). Once it
 * dies, this process is someone else's: init's, or a subreaper's. */
static int supervised_by(const char *parent)
{
    pid_t want = (pid_t)atol(parent), pid = getppid();
    if (pid == want)
        return 1;
    for (int depth = 0; pid > 1 && pid != want && depth < 8; depth++) {
        char path[32], stat[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
        if (f)
            fclose(f);
        stat[n] = 0;
        char *end = strrchr(stat, ')'); /* "pid (comm) state ppid ...": comm may hold ')' */
        pid = end ? (pid_t)strtol(end + 3, NULL, 10) : 0;
    }
    return pid == want && pid > 1; /* every process descends from init */
}

static void *open_socket(void *ctx, int type, const char *endpoint)
{
    int hwm = HWM, zero = 0, one = 1;
    int64_t max = MAX_FRAME_BYTES;
    void *s = zmq_socket(ctx, type);
    if (!s)
        die(1, "zmq_socket: %s", zmq_strerror(errno));
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (type == ZMQ_PULL) {
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof max);
        if (zmq_bind(s, endpoint) != 0)
            die(1, "cannot bind %s: %s", endpoint, zmq_strerror(errno));
    } else {
        /* Nothing is queued for a peer not connected: it waits in our backlog (1.6). */
        zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one);
        if (zmq_connect(s, endpoint) != 0)
            die(2, "cannot connect to %s: %s", endpoint, zmq_strerror(errno));
    }
    return s;
}

int main(int argc, char **argv)
{
    /* --inbound, --events, --outputs, --key-file, --vocab: each "--x V" or "--x=V",
     * else its environment variable (the key file: only if SWITCHBOARD_STACK_KEY is not set). */
    static const char *const flags[] = { "--inbound", "--events", "--outputs", "--key-file",
                                         "--vocab" };
    static const char *const envs[] = { "SWITCHBOARD_ENGINE_INBOUND", "SWITCHBOARD_ENGINE_EVENTS",
                                        "SWITCHBOARD_ENGINE_OUTPUTS", NULL,
                                        "SWITCHBOARD_VOCAB_FILE" };
    const char *opt[5] = { 0 };
    for (int i = 1; i < argc; i++) {
        int f = 0;
        size_t n = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: echo_engine [--inbound EP] [--events EP] [--outputs EP] [--key-file PATH]"
                 " [--vocab PATH]\n(defaults: SWITCHBOARD_ENGINE_INBOUND, _EVENTS, _OUTPUTS, "
                 "SWITCHBOARD_STACK_KEY or SWITCHBOARD_KEY_FILE, SWITCHBOARD_VOCAB_FILE)");
            return 0;
        }
        for (; f < 5 && strncmp(argv[i], flags[f], n = strlen(flags[f])); f++)
            ;
        if (f < 5 && argv[i][n] == '=')
            opt[f] = argv[i] + n + 1;
        else if (f < 5 && !argv[i][n] && i + 1 < argc)
            opt[f] = argv[++i];
        else
            die(2, "unknown or incomplete argument %s (see --help)", argv[i]);
    }
    for (int f = 0; f < 5; f++)
        if (!opt[f] && envs[f] && getenv(envs[f]) && *getenv(envs[f]))
            opt[f] = getenv(envs[f]);
    const char *inbound = opt[0], *parent = getenv("SWITCHBOARD_PARENT_PID");
    char *key_text = NULL;
    if (!opt[0] || !opt[1] || !opt[2])
        die(2, "missing endpoint: give --inbound, --events and --outputs (or "
               "SWITCHBOARD_ENGINE_INBOUND, _EVENTS and _OUTPUTS)");
    for (int f = 0; f < 3; f++)
        if (!endpoint_ok(opt[f]))
            die(2, "endpoint %s: not ipc://, inproc:// or a loopback tcp://", opt[f]);
    if (!opt[4])
        die(2, "missing vocabulary: give --vocab or SWITCHBOARD_VOCAB_FILE");
    const char *why = load_vocab(opt[4]);
    if (why)
        die(2, "vocabulary %s: %s", opt[4], why);
    if (opt[3] || !getenv("SWITCHBOARD_STACK_KEY") || !*getenv("SWITCHBOARD_STACK_KEY")) {
        const char *file = opt[3] ? opt[3] : getenv("SWITCHBOARD_KEY_FILE");
        if (file && *file)
            key = key_text = read_key(file);
        else
            fputs("echo_engine: no stack key: only a router without one accepts it\n", stderr);
    } else {
        key = getenv("SWITCHBOARD_STACK_KEY");
    }

    /* Keep a parent-death signal already set (switchboard up sets SIGKILL before exec);
     * started by hand, ask for SIGTERM. */
    int deathsig = 0;
    if (prctl(PR_GET_PDEATHSIG, &deathsig) == 0 && deathsig == 0)
        prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (parent && *parent && !supervised_by(parent))
        die(1, "parent %s is gone", parent);
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* ZeroMQ's threads inherit a blocked mask, so signals reach this thread and end
     * zmq_poll (EINTR) at once. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    void *ctx = zmq_ctx_new();
    const char *ipc = strncmp(inbound, "ipc://", 6) ? NULL : inbound + 6;
    if (ipc && ipc_in_use(ipc))
        die(1, "%s is in use by a running process", inbound);
    void *pull = open_socket(ctx, ZMQ_PULL, inbound);
    events.sock = open_socket(ctx, ZMQ_PUSH, opt[1]);
    outputs.sock = open_socket(ctx, ZMQ_PUSH, opt[2]);
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    started_ns = now_ns(CLOCK_REALTIME);
    fprintf(stderr, "echo_engine: serving in pid %d on %s\n", (int)getpid(), inbound);
    for (long long next_step = 0, next_load = 0; !stopping;) {
        long long now = now_ns(CLOCK_MONOTONIC);
        if (now >= next_load) {
            send_load(); /* at start, then every LOAD_NS (5.8) */
            next_load = now + LOAD_NS;
            if (parent && *parent && !supervised_by(parent))
                break; /* the supervisor is gone */
        }
        long long due = n_running && !paused && next_step < next_load ? next_step : next_load;
        long timeout = due > now ? (long)((due - now) / 1000000) : 0;
        if (events.head || outputs.head) /* a backlog: try again soon */
            timeout = timeout < 10 ? timeout : 10;
        zmq_pollitem_t item = { pull, 0, ZMQ_POLLIN, 0 };
        zmq_poll(&item, 1, timeout < 100 ? timeout : 100);
        read_inbound(pull);
        flush(&events);
        flush(&outputs);
        now = now_ns(CLOCK_MONOTONIC);
        if (n_running && !paused && now >= next_step)
            step(), next_step = now + STEP_NS;
    }

    /* Stop: what is queued gets a second to leave (then counted as dropped), the sockets
     * a short linger, and the ipc socket file bound here is removed. */
    int linger = 500;
    long long end = now_ns(CLOCK_MONOTONIC) + 1000000000LL;
    while ((events.head || outputs.head) && now_ns(CLOCK_MONOTONIC) < end)
        flush(&events), flush(&outputs), usleep(5000);
    pusher *ps[] = { &events, &outputs };
    for (int i = 0; i < 2; i++) {
        for (outmsg *m = ps[i]->head, *next; m; m = next)
            next = m->next, free_msg(m), counters[C_DROP_CLOSED]++;
        zmq_setsockopt(ps[i]->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(ps[i]->sock);
    }
    zmq_close(pull);
    zmq_ctx_term(ctx);
    if (ipc && ipc[0] != '@') /* not an abstract socket */
        unlink(ipc);
    while (n_running)
        remove_running(n_running - 1);
    free(last_op[0]), free(last_op[1]), free(key_text);
    free(V.file), free(V.tok), free(V.tok_len), free(V.flags);
    mp_buf_free(&scratch_bytes), mp_buf_free(&scratch_text), mp_buf_free(&scratch_prior);
    fprintf(stderr, "echo_engine: stopped after %lld steps;", steps);
    for (int i = 0; i < C_COUNT; i++)
        if (counters[i])
            fprintf(stderr, " %s=%llu", counter_names[i], counters[i]);
    fputc('\n', stderr);
    return 0;
}
