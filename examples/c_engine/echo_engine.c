/* echo_engine: a Switchboard engine in C on libzmq, written from docs/protocol.md alone.
 *
 * Every GENERATE is answered one token a step (a step every 5 ms while anything runs),
 * echoing the prompt's ids once: at most max_new_tokens, ending at the prompt's end with
 * {"type": "stop", "matched": nil}, or earlier by the built-in engine's stop rules
 * (switchboard/engine/stopping.py). EMBED is answered at once with an 8-float vector.
 * ABORT, PAUSE (abort / retract / in_place), CONTINUE and FREEZE_GC are applied; every
 * pause and continue is acknowledged; LOAD goes out at start and every 0.5 s.
 *
 * Sockets (protocol.md 1.3): PULL bound on the inbound endpoint, PUSH connected to the
 * router's engine_events ("events") and to the detokenizer router's inbound ("outputs").
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
       K_FREEZE_GC = 30, K_LOAD = 31, K_TOKEN_BATCH = 40, K_STR_BATCH = 41,
       K_EMBEDDING_BATCH = 42, K_IDLE = 43 };

#define MAX_RUNNING 256            /* LOAD max_running; beyond, an abort row */
#define MAX_ROWS 4096              /* rows per batch message (protocol.md 2.1) */
#define MAX_FRAMES (1 + MAX_ROWS)
#define MAX_FRAME_BYTES (64 << 20) /* ZMQ_MAXMSGSIZE of a bound socket (2.1) */
#define HWM 10000                  /* SNDHWM/RCVHWM (1.6) */
#define BACKLOG 1000               /* messages waiting per PUSH in front of ZeroMQ (1.7) */
#define BUDGET 512                 /* inbound messages read per loop turn */
#define STEP_NS 5000000LL
#define LOAD_NS 500000000LL
#define PROMPT_HEAD 5              /* prompt ids ahead of the output in decode_ids (3.6) */
#define STOP_TAIL_SLACK 4          /* stopping.py: tail tokens beyond the longest stop */
#define EMBED_DIM 8
#define MAX_PROMPT (1 << 20)       /* bounds of one request; beyond, an abort row */
#define MAX_STOPS 64
#define MAX_STOP_BYTES 1024
#define MAX_STOP_IDS 4096

/* ---- counters, printed on exit ---- */
#define COUNTERS(X) \
    X(RX_GENERATE, "received{generate}") X(RX_EMBED, "received{embed}") \
    X(RX_ABORT, "received{abort}") X(RX_PAUSE, "received{pause}") \
    X(RX_CONTINUE, "received{continue}") X(RX_FREEZE, "received{freeze_gc}") \
    X(TX_TOKEN, "sent{token_batch}") X(TX_EMBED, "sent{embedding_batch}") \
    X(TX_ACK, "sent{ack}") X(TX_LOAD, "sent{load}") X(TX_FREEZE, "sent{freeze_gc}") \
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

/* ---- the vocabulary file (format switchboard-vocab/1, contract22) ---- */
typedef struct {
    char *file;                /* the whole file; token bytes point into it */
    uint32_t size;             /* vocab_size */
    const char **tok;          /* tokens[i] and its length */
    uint32_t *tok_len;
    uint8_t *flags;            /* per id: 1 special, 2 end of generation */
    int strip_leading_space;
} vocab_t;

/* ---- a generation in flight ---- */
typedef struct {
    char *rid, *owner, *trace;  /* trace: the request's traceparent, "" for none */
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
    int64_t n;                 /* the length, or the stop id */
    const char *text;          /* the stop string or the abort message */
    size_t len;
    const char *err_type;      /* an abort with status 503 (a fault, 3.6) */
} finish_t;

/* ---- a PUSH with its bounded backlog (protocol.md 1.7) ---- */
typedef struct outmsg {
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
static vocab_t V;
static req_t *running[MAX_RUNNING];
static int n_running;
static int paused;
static char pause_mode[16];
static char *last_op_head, *last_op_tail;  /* newest ordered op applied (3.4) */
static const char *key = "";
static long long steps, started_ns;
static pusher events, outputs;
static mp_buf scratch_bytes, scratch_text;

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
    fprintf(stderr, "echo_engine: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* ---------------------------------------------------------------- sending */

static int try_send(void *sock, outmsg *m)
{
    for (int k = 0; k < m->n; k++) {
        int flags = ZMQ_DONTWAIT | (k + 1 < m->n ? ZMQ_SNDMORE : 0);
        if (zmq_send(sock, m->f[k].d, m->f[k].n, flags) < 0)
            /* Only the first frame can meet EAGAIN: ZeroMQ takes the rest with it. */
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
    return m;
}

static void flush(pusher *p)
{
    while (p->head) {
        int sent = try_send(p->sock, p->head);
        if (sent == 0)
            return;
        if (sent < 0)
            counters[C_DROP_SEND]++;
        outmsg *m = p->head;
        p->head = m->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        free_msg(m);
    }
}

/* Send now, or queue behind what waits; never blocks. Takes ownership of m. */
static void send_msg(pusher *p, outmsg *m, int counter)
{
    for (int k = 0; k < m->n; k++)
        if (m->f[k].oom) {
            counters[C_DROP_OOM]++;
            free_msg(m);
            return;
        }
    counters[counter]++;
    flush(p);
    int sent = p->head ? 0 : try_send(p->sock, m);
    if (sent != 0) {
        if (sent < 0)
            counters[C_DROP_SEND]++;
        free_msg(m);
    } else if (p->queued >= BACKLOG) {
        counters[C_DROP_BACKLOG]++;
        free_msg(m);
    } else {
        m->next = NULL;
        if (p->tail)
            p->tail->next = m;
        else
            p->head = m;
        p->tail = m;
        p->queued++;
    }
}

/* The canonical header (2.2): [kind, rids, reply_to, sent_ns, "", "", row_traces]. */
static void w_header(mp_buf *w, int kind, req_t *const *rows, int n)
{
    int traced = 0;
    mp_w_array(w, 7);
    mp_w_int(w, kind);
    mp_w_array(w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        mp_w_cstr(w, rows[i]->rid);
        traced |= rows[i]->trace[0] != 0;
    }
    mp_w_array(w, (uint32_t)n);
    for (int i = 0; i < n; i++)
        mp_w_cstr(w, rows[i]->owner);
    mp_w_uint(w, (uint64_t)now_ns(CLOCK_REALTIME));
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
    mp_w_cstr(w, "type");
    mp_w_cstr(w, types[f->kind]);
    mp_w_cstr(w, f->kind == F_LENGTH ? "length" : f->kind == F_ABORT ? "message" : "matched");
    if (f->kind == F_LENGTH || f->kind == F_STOP_ID)
        mp_w_int(w, f->n);
    else if (f->kind == F_STOP_NIL)
        mp_w_nil(w);
    else
        mp_w_str(w, f->text, f->len);
    if (f->err_type) {
        mp_w_cstr(w, "status_code");
        mp_w_int(w, 503);
        mp_w_cstr(w, "err_type");
        mp_w_cstr(w, f->err_type);
    }
}

static void w_key_array1(mp_buf *w, const char *k)
{
    mp_w_cstr(w, k);
    mp_w_array(w, 1);
}

/* One BatchTokenIDOutput row (4.1): every column a one-entry array. new_id: whether the
 * row carries the request's newest output id (not an abort row). */
static void w_token_row(mp_buf *w, const req_t *q, const finish_t *f, int new_id)
{
    uint32_t head = q->n_prompt < PROMPT_HEAD ? q->n_prompt : PROMPT_HEAD;
    mp_w_map(w, 13);
    w_key_array1(w, "rids"), mp_w_cstr(w, q->rid);
    w_key_array1(w, "http_worker_ipcs"), mp_w_cstr(w, q->owner);
    w_key_array1(w, "finished_reasons"), w_finish(w, f);
    w_key_array1(w, "prompt_tokens"), mp_w_int(w, q->n_prompt);
    w_key_array1(w, "cached_tokens"), mp_w_int(w, 0);
    w_key_array1(w, "completion_tokens"), mp_w_int(w, q->n_out);
    /* Only this row's new id (3.7): a row starts at completion_tokens - len(output_ids). */
    w_key_array1(w, "output_ids"), mp_w_array(w, new_id);
    if (new_id)
        mp_w_int(w, q->out[q->n_out - 1]);
    /* decode_ids: the prompt's last ids, then every output id; read_offsets: where the
     * output starts. The detokenizer decodes the output as continuing them (3.6). */
    w_key_array1(w, "decode_ids"), mp_w_array(w, head + q->n_out);
    for (uint32_t i = q->n_prompt - head; i < q->n_prompt; i++)
        mp_w_int(w, q->prompt[i]);
    for (uint32_t i = 0; i < q->n_out; i++)
        mp_w_int(w, q->out[i]);
    w_key_array1(w, "read_offsets"), mp_w_int(w, head);
    w_key_array1(w, "skip_special_tokens"), mp_w_bool(w, q->skip_special);
    w_key_array1(w, "spaces_between_special_tokens"), mp_w_bool(w, q->spaces_between);
    w_key_array1(w, "no_stop_trim"), mp_w_bool(w, q->no_stop_trim);
    w_key_array1(w, "stop_holdback"), mp_w_int(w, q->holdback);
}

/* A TOKEN_BATCH per MAX_ROWS rows: the header, then one frame per row (4.1). */
static void send_token_rows(req_t *const *rows, const finish_t *fins, int n, int new_ids)
{
    for (int at = 0; at < n; at += MAX_ROWS) {
        int chunk = n - at < MAX_ROWS ? n - at : MAX_ROWS;
        outmsg *m = new_msg(1 + chunk);
        if (!m) {
            counters[C_DROP_OOM]++;
            continue;
        }
        w_header(&m->f[0], K_TOKEN_BATCH, rows + at, chunk);
        for (int i = 0; i < chunk; i++)
            w_token_row(&m->f[1 + i], rows[at + i], &fins[at + i], new_ids);
        send_msg(&outputs, m, C_TX_TOKEN);
    }
}

static void send_abort_row(const req_t *q, const char *message, size_t len, const char *err)
{
    finish_t f = { F_ABORT, 0, message, len, err };
    send_token_rows((req_t *const *)&q, &f, 1, 0);
}

/* ACK or LOAD on events: the canonical empty header, one payload frame. */
static void send_event(int kind, mp_buf *payload, int counter)
{
    outmsg *m = new_msg(2);
    if (!m) {
        counters[C_DROP_OOM]++;
        mp_buf_free(payload);
        return;
    }
    w_header(&m->f[0], kind, NULL, 0);
    m->f[1] = *payload;
    send_msg(kind == K_FREEZE_GC ? &outputs : &events, m, counter);
}

static void send_ack(const char *op_id, uint32_t len)
{
    mp_buf w = { 0 };
    mp_w_map(&w, 3);
    mp_w_cstr(&w, "op_id"), mp_w_str(&w, op_id, len);
    mp_w_cstr(&w, "participant"), mp_w_cstr(&w, "engine");
    mp_w_cstr(&w, "secret"), mp_w_cstr(&w, key); /* the stack key (5.14) */
    send_event(K_ACK, &w, C_TX_ACK);
}

static void send_load(void)
{
    int held = paused && strcmp(pause_mode, "retract") == 0; /* retracted: waiting */
    mp_buf w = { 0 };
    mp_w_map(&w, 9);
    mp_w_cstr(&w, "running"), mp_w_int(&w, held ? 0 : n_running);
    mp_w_cstr(&w, "waiting"), mp_w_int(&w, held ? n_running : 0);
    mp_w_cstr(&w, "max_running"), mp_w_int(&w, MAX_RUNNING);
    mp_w_cstr(&w, "token_usage"), mp_w_f64(&w, (double)n_running / MAX_RUNNING);
    mp_w_cstr(&w, "step"), mp_w_int(&w, steps);
    mp_w_cstr(&w, "taken_ns"), mp_w_int(&w, now_ns(CLOCK_REALTIME));
    mp_w_cstr(&w, "engine_started_ns"), mp_w_int(&w, started_ns);
    mp_w_cstr(&w, "features"), mp_w_array(&w, 0);
    mp_w_cstr(&w, "secret"), mp_w_cstr(&w, key);
    send_event(K_LOAD, &w, C_TX_LOAD);
}

/* ---------------------------------------------------------------- requests */

static void free_req(req_t *q)
{
    if (!q)
        return;
    for (uint32_t i = 0; i < q->n_stops; i++)
        free(q->stops[i]);
    free(q->stops), free(q->stop_len), free(q->stop_ids);
    free(q->prompt), free(q->out);
    free(q->rid), free(q->owner), free(q->trace);
    free(q);
}

static int read_ids(mp_reader *r, int64_t **ids, uint32_t *n, uint32_t max, int *too_large)
{
    uint32_t count;
    free(*ids); /* a key given twice: the last wins */
    *ids = NULL, *n = 0;
    if (!mp_read_array(r, &count))
        return 0;
    if (count > max) {
        *too_large = 1;
        for (uint32_t i = 0; i < count; i++)
            if (!mp_skip(r))
                return 0;
        return 1;
    }
    *ids = calloc(count ? count : 1, sizeof **ids);
    if (!*ids)
        return 0;
    for (*n = 0; *n < count; (*n)++)
        if (!mp_read_int(r, &(*ids)[*n]))
            return 0;
    return 1;
}

static uint32_t utf8_chars(const char *s, uint32_t n)
{
    uint32_t chars = 0;
    for (uint32_t i = 0; i < n; i++)
        chars += ((uint8_t)s[i] & 0xc0) != 0x80;
    return chars;
}

static int read_stops(mp_reader *r, req_t *q, int *too_large)
{
    uint32_t count, longest = 0;
    for (uint32_t i = 0; i < q->n_stops; i++) /* a key given twice: the last wins */
        free(q->stops[i]);
    free(q->stops), free(q->stop_len);
    q->stops = NULL, q->stop_len = NULL, q->n_stops = 0;
    if (!mp_read_array(r, &count))
        return 0;
    q->stops = calloc(count ? count : 1, sizeof *q->stops);
    q->stop_len = calloc(count ? count : 1, sizeof *q->stop_len);
    if (!q->stops || !q->stop_len)
        return 0;
    for (uint32_t i = 0; i < count; i++) {
        const char *s;
        uint32_t len;
        if (!mp_read_str(r, &s, &len))
            return 0;
        if (len == 0) /* the built-in engine drops empty stop strings */
            continue;
        if (q->n_stops >= MAX_STOPS || len > MAX_STOP_BYTES) {
            *too_large = 1;
            continue;
        }
        if (!(q->stops[q->n_stops] = dup_n(s, len)))
            return 0;
        q->stop_len[q->n_stops++] = len;
        uint32_t chars = utf8_chars(s, len);
        longest = chars > longest ? chars : longest;
    }
    /* stop_holdback and the tail window are in characters, as Python's len(). */
    q->holdback = longest ? longest - 1 : 0;
    q->window = longest + STOP_TAIL_SLACK;
    return 1;
}

static int read_sampling(mp_reader *r, req_t *q, int *too_large)
{
    uint32_t pairs;
    if (!mp_read_map(r, &pairs))
        return 0;
    for (uint32_t i = 0; i < pairs && !r->err; i++) {
        const char *k;
        uint32_t n;
        if (!mp_read_str(r, &k, &n))
            return 0;
        if (mp_key_is(k, n, "max_new_tokens"))
            mp_read_int(r, &q->max_new);
        else if (mp_key_is(k, n, "min_new_tokens"))
            mp_read_int(r, &q->min_new);
        else if (mp_key_is(k, n, "stop"))
            read_stops(r, q, too_large);
        else if (mp_key_is(k, n, "stop_token_ids"))
            read_ids(r, &q->stop_ids, &q->n_stop_ids, MAX_STOP_IDS, too_large);
        else if (mp_key_is(k, n, "ignore_eos"))
            mp_read_bool(r, &q->ignore_eos);
        else if (mp_key_is(k, n, "skip_special_tokens"))
            mp_read_bool(r, &q->skip_special);
        else if (mp_key_is(k, n, "spaces_between_special_tokens"))
            mp_read_bool(r, &q->spaces_between);
        else if (mp_key_is(k, n, "no_stop_trim"))
            mp_read_bool(r, &q->no_stop_trim);
        else
            mp_skip(r); /* sampling this engine does not do; unknown keys (3.1) */
    }
    return !r->err;
}

/* GENERATE or EMBED payload (3.2): rid and input_ids required, missing keys default. */
static int read_request(mp_reader *r, req_t *q, int generate, const char **rid,
                        uint32_t *rid_len, int *too_large)
{
    uint32_t pairs;
    int have_ids = 0;
    *rid = NULL;
    q->max_new = 128, q->skip_special = 1, q->spaces_between = 1;
    q->window = STOP_TAIL_SLACK;
    if (!mp_read_map(r, &pairs))
        return 0;
    for (uint32_t i = 0; i < pairs && !r->err; i++) {
        const char *k;
        uint32_t n;
        if (!mp_read_str(r, &k, &n))
            return 0;
        if (mp_key_is(k, n, "rid"))
            mp_read_str(r, rid, rid_len);
        else if (mp_key_is(k, n, "input_ids"))
            have_ids = read_ids(r, &q->prompt, &q->n_prompt, MAX_PROMPT, too_large);
        else if (generate && mp_key_is(k, n, "sampling_params"))
            read_sampling(r, q, too_large);
        else
            mp_skip(r);
    }
    return !r->err && r->p == r->end && *rid && have_ids;
}

static int find_running(const char *owner, const char *rid, size_t rid_len)
{
    for (int i = 0; i < n_running; i++)
        if (strcmp(running[i]->owner, owner) == 0 && strlen(running[i]->rid) == rid_len &&
            memcmp(running[i]->rid, rid, rid_len) == 0)
            return i;
    return -1;
}

static void remove_running(int i)
{
    free_req(running[i]);
    memmove(running + i, running + i + 1, (size_t)(n_running - i - 1) * sizeof *running);
    n_running--;
}

static void embed(const req_t *q)
{
    outmsg *m = new_msg(2);
    if (!m) {
        counters[C_DROP_OOM]++;
        return;
    }
    finish_t f = { F_STOP_NIL, 0, NULL, 0, NULL }; /* as the built-in engine answers */
    mp_buf *w = &m->f[1];
    w_header(&m->f[0], K_EMBEDDING_BATCH, (req_t *const *)&q, 1);
    mp_w_map(w, 6);
    w_key_array1(w, "rids"), mp_w_cstr(w, q->rid);
    w_key_array1(w, "http_worker_ipcs"), mp_w_cstr(w, q->owner);
    w_key_array1(w, "finished_reasons"), w_finish(w, &f);
    w_key_array1(w, "prompt_tokens"), mp_w_int(w, q->n_prompt);
    w_key_array1(w, "cached_tokens"), mp_w_int(w, 0);
    w_key_array1(w, "embeddings"), mp_w_array(w, EMBED_DIM);
    /* v[k] in [-1, 1): FNV-1a over (k, every id's 8 little-endian bytes). */
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
    if (!q || !read_request(r, q, kind == K_GENERATE, &rid, &rid_len, &too_large)) {
        counters[C_BAD_PAYLOAD]++;
        free_req(q);
        return;
    }
    if (rid_len != hrid_len || memcmp(rid, hrid, rid_len) != 0) {
        counters[C_RID_MISMATCH]++;
        free_req(q);
        return;
    }
    q->rid = dup_n(rid, rid_len), q->owner = dup_n(owner, owner_len);
    q->trace = dup_n(trace, trace_len);
    q->out = calloc(q->n_prompt ? q->n_prompt : 1, sizeof *q->out);
    if (!q->rid || !q->owner || !q->trace || !q->out) {
        counters[C_DROP_OOM]++;
        free_req(q);
        return;
    }
    if (find_running(q->owner, rid, rid_len) >= 0) {
        counters[C_DUP_REQ]++; /* still open: a worker re-sent it (5.11) */
    } else if (too_large) {
        counters[C_TOO_LARGE]++;
        static const char msg[] = "the request is beyond the echo engine's bounds (prompt "
                                  "ids, stop strings or stop token ids)";
        send_abort_row(q, msg, sizeof msg - 1, NULL);
    } else if (kind == K_EMBED) {
        embed(q);
    } else if (n_running >= MAX_RUNNING) {
        counters[C_QUEUE_FULL]++;
        static const char msg[] = "the echo engine is full (256 running); retry later";
        send_abort_row(q, msg, sizeof msg - 1, "engine_queue_full");
    } else if (q->n_prompt == 0) {
        finish_t f = { F_STOP_NIL, 0, NULL, 0, NULL }; /* nothing to echo */
        send_token_rows(&q, &f, 1, 0);
    } else {
        if (q->max_new < 1) /* as the built-in engine: at least one token */
            q->max_new = 1;
        running[n_running++] = q;
        return;
    }
    free_req(q);
}

static void abort_rows(const char *owner, uint32_t owner_len, const char *rid,
                       uint32_t rid_len, int all, const char *reason, uint32_t reason_len)
{
    req_t *rows[MAX_RUNNING];
    finish_t fins[MAX_RUNNING];
    int n = 0;
    for (int i = 0; i < n_running; i++) {
        const req_t *q = running[i];
        int mine = !owner || (strlen(q->owner) == owner_len &&
                              memcmp(q->owner, owner, owner_len) == 0);
        if (mine && (all || (strlen(q->rid) == rid_len && memcmp(q->rid, rid, rid_len) == 0))) {
            fins[n] = (finish_t){ F_ABORT, 0, reason, reason_len, NULL };
            rows[n++] = running[i];
        }
    }
    if (n == 0)
        return;
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
    const char *rid = "", *reason = "client";
    uint32_t rid_len = 0, reason_len = 6, pairs;
    int all = 0;
    if (!mp_read_map(r, &pairs))
        goto bad;
    for (uint32_t i = 0; i < pairs && !r->err; i++) {
        const char *k;
        uint32_t n;
        if (!mp_read_str(r, &k, &n))
            goto bad;
        if (mp_key_is(k, n, "rid"))
            mp_read_str(r, &rid, &rid_len);
        else if (mp_key_is(k, n, "abort_all"))
            mp_read_bool(r, &all);
        else if (mp_key_is(k, n, "reason"))
            mp_read_str(r, &reason, &reason_len);
        else
            mp_skip(r);
    }
    if (r->err || r->p != r->end)
        goto bad;
    if (hrid && (rid_len != hrid_len || memcmp(rid, hrid, rid_len) != 0)) {
        counters[C_RID_MISMATCH]++;
        return;
    }
    abort_rows(owner, owner_len, rid, rid_len, all, reason, reason_len);
    return;
bad:
    counters[C_BAD_PAYLOAD]++;
}

/* Decimal strings compared as the integers they are, whatever their length. */
static int cmp_decimal(const char *a, size_t an, const char *b, size_t bn)
{
    while (an > 1 && *a == '0')
        a++, an--;
    while (bn > 1 && *b == '0')
        b++, bn--;
    if (an != bn)
        return an < bn ? -1 : 1;
    return memcmp(a, b, an);
}

static int all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return n > 0;
}

/* Whether to apply op_id (3.4): "<incarnation>-<seq>" newer than the last applied, in
 * the order of (incarnation, seq); an id without that shape is applied, orders nothing. */
static int admit_op(const char *id, uint32_t n)
{
    const char *dash = memrchr(id, '-', n);
    if (!dash)
        return 1;
    size_t hn = (size_t)(dash - id), tn = n - hn - 1;
    if (!all_digits(id, hn) || !all_digits(dash + 1, tn))
        return 1;
    if (last_op_head) {
        int c = cmp_decimal(id, hn, last_op_head, strlen(last_op_head));
        if (c < 0 || (c == 0 && cmp_decimal(dash + 1, tn, last_op_tail,
                                            strlen(last_op_tail)) <= 0))
            return 0;
    }
    char *head = dup_n(id, hn), *tail = dup_n(dash + 1, tn);
    if (!head || !tail) {
        free(head), free(tail);
        return 1;
    }
    free(last_op_head), free(last_op_tail);
    last_op_head = head, last_op_tail = tail;
    return 1;
}

static void on_command(int kind, mp_reader *r)
{
    const char *op = NULL, *mode = "abort";
    uint32_t op_len = 0, mode_len = 5, pairs;
    if (!mp_read_map(r, &pairs))
        goto bad;
    for (uint32_t i = 0; i < pairs && !r->err; i++) {
        const char *k;
        uint32_t n;
        if (!mp_read_str(r, &k, &n))
            goto bad;
        if (mp_key_is(k, n, "op_id"))
            mp_read_str(r, &op, &op_len);
        else if (kind == K_PAUSE && mp_key_is(k, n, "mode"))
            mp_read_str(r, &mode, &mode_len);
        else
            mp_skip(r);
    }
    if (r->err || r->p != r->end || !op ||
        !(mp_key_is(mode, mode_len, "abort") || mp_key_is(mode, mode_len, "retract") ||
          mp_key_is(mode, mode_len, "in_place")))
        goto bad;
    if (!admit_op(op, op_len)) {
        counters[C_DUP_OP]++; /* no newer than the last applied: ack only */
    } else if (kind == K_PAUSE) {
        if (mp_key_is(mode, mode_len, "abort"))
            abort_rows(NULL, 0, NULL, 0, 1, "paused", 6);
        /* retract and in_place keep every request: there is no cache to free */
        paused = 1;
        memcpy(pause_mode, mode, mode_len), pause_mode[mode_len] = 0;
    } else {
        paused = 0;
    }
    send_ack(op, op_len); /* after applying (5.7) */
    send_load();
    return;
bad:
    counters[C_BAD_PAYLOAD]++;
}

/* ---------------------------------------------------------------- inbound */

static int known_kind(int64_t k)
{
    static const int kinds[] = { 1, 2, 3, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 30, 31,
                                 40, 41, 42, 43 };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (kinds[i] == k)
            return 1;
    return 0;
}

typedef struct {
    int64_t kind;
    uint32_t n_rids, n_reply, n_traces;
    const char *rid, *reply, *trace;  /* the first of each; trace: the traceparent */
    uint32_t rid_len, reply_len, trace_len;
} header_t;

static int read_str_array(mp_reader *r, uint32_t *count, const char **first, uint32_t *len)
{
    if (!mp_read_array(r, count))
        return 0;
    for (uint32_t i = 0; i < *count; i++) {
        const char *s;
        uint32_t n;
        if (!mp_read_str(r, &s, &n))
            return 0;
        if (i == 0)
            *first = s, *len = n;
    }
    return 1;
}

/* The header (2.2): an array of 1..7 (or more: extra trailing elements ignored). */
static int read_header(const zmq_msg_t *frame, header_t *h)
{
    mp_reader r;
    mp_obj o;
    uint32_t n;
    memset(h, 0, sizeof *h);
    h->trace = "";
    mp_reader_init(&r, zmq_msg_data((zmq_msg_t *)frame), zmq_msg_size((zmq_msg_t *)frame));
    if (!mp_read_array(&r, &n) || n == 0 || !mp_read_int(&r, &h->kind))
        return 0;
    if (n > 1)
        read_str_array(&r, &h->n_rids, &h->rid, &h->rid_len);
    if (n > 2)
        read_str_array(&r, &h->n_reply, &h->reply, &h->reply_len);
    if (n > 3 && mp_next(&r, &o) && o.type != MP_INT && o.type != MP_UINT)
        r.err = 1; /* sent_ns: any integer */
    if (n > 4)
        mp_read_str(&r, &h->trace, &h->trace_len);
    if (n > 5) {
        const char *s;
        uint32_t len;
        mp_read_str(&r, &s, &len); /* tracestate */
    }
    if (n > 6) {
        const char *s;
        uint32_t len;
        read_str_array(&r, &h->n_traces, &s, &len);
    }
    for (uint32_t i = 7; i < n; i++)
        mp_skip(&r);
    return !r.err && r.p == r.end && known_kind(h->kind);
}

/* The shape rules (2.5) for what reaches an engine. */
static int header_shape_ok(const header_t *h)
{
    int batch = h->kind >= K_TOKEN_BATCH && h->kind <= K_EMBEDDING_BATCH;
    if (h->kind != K_ABORT && h->n_rids != h->n_reply)
        return 0;
    if ((h->kind == K_GENERATE || h->kind == K_EMBED) && h->n_rids != 1)
        return 0;
    if (h->kind == K_ABORT && (h->n_reply != 1 || h->n_rids > 1))
        return 0;
    if (batch && h->n_rids == 0)
        return 0;
    if (h->kind == K_IDLE && h->n_rids)
        return 0;
    return h->n_traces == 0 || (batch && h->n_traces == h->n_rids);
}

static void handle(zmq_msg_t *frames, int count)
{
    header_t h;
    if (count > MAX_FRAMES) {
        counters[C_TOO_MANY]++;
        return;
    }
    if (!read_header(&frames[0], &h)) {
        counters[C_BAD_HEADER]++;
        return;
    }
    if (!header_shape_ok(&h)) {
        counters[C_HEADER_SHAPE]++;
        return;
    }
    int batch = h.kind >= K_TOKEN_BATCH && h.kind <= K_EMBEDDING_BATCH;
    long expected = batch ? 1 + (long)h.n_rids : h.kind == K_IDLE ? 1 : 2;
    if (count != expected) {
        counters[C_FRAME_COUNT]++;
        return;
    }
    mp_reader r = { 0 };
    if (count == 2)
        mp_reader_init(&r, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]));
    switch (h.kind) {
    case K_GENERATE: case K_EMBED:
        counters[h.kind == K_GENERATE ? C_RX_GENERATE : C_RX_EMBED]++;
        on_request((int)h.kind, &r, h.rid, h.rid_len, h.reply, h.reply_len, h.trace,
                   h.trace_len);
        break;
    case K_ABORT:
        counters[C_RX_ABORT]++;
        on_abort(&r, h.n_rids ? h.rid : NULL, h.rid_len, h.reply, h.reply_len);
        break;
    case K_PAUSE: case K_CONTINUE:
        counters[h.kind == K_PAUSE ? C_RX_PAUSE : C_RX_CONTINUE]++;
        on_command((int)h.kind, &r);
        break;
    case K_FREEZE_GC: {
        /* No garbage collector here (3.5); passed on so the detokenizers freeze theirs. */
        counters[C_RX_FREEZE]++;
        mp_buf w = { 0 };
        if (!mp_read_map(&r, &(uint32_t){ 0 })) {
            counters[C_BAD_PAYLOAD]++;
            break;
        }
        mp_w_raw(&w, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]));
        send_event(K_FREEZE_GC, &w, C_TX_FREEZE);
        break;
    }
    default:
        counters[C_UNEXPECTED]++;
    }
}

/* Read what waits, at most BUDGET messages; frames beyond MAX_FRAMES are discarded. */
static void read_inbound(void *pull)
{
    static zmq_msg_t frames[2];
    for (int budget = 0; budget < BUDGET; budget++) {
        int count = 0, more = 1;
        while (more) {
            zmq_msg_t part;
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, pull, count ? 0 : ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&part);
                if (count == 0)
                    return; /* nothing waiting (or a signal) */
                if (errno == EINTR)
                    continue; /* the rest of a message is there: ZeroMQ sends it whole */
                break;
            }
            more = zmq_msg_more(&part);
            if (count < 2)
                frames[count] = part;
            else
                zmq_msg_close(&part);
            count++;
        }
        handle(frames, count);
        for (int k = 0; k < count && k < 2; k++)
            zmq_msg_close(&frames[k]);
    }
}

/* ---------------------------------------------------------------- stepping */

/* Append bytes as text: invalid UTF-8 becomes U+FFFD, one per maximal bad subpart. */
static void utf8_lossy(const uint8_t *s, size_t n, mp_buf *out)
{
    static const uint8_t fffd[] = { 0xef, 0xbf, 0xbd };
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i], lo = 0x80, hi = 0xbf;
        size_t need = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                      : c >= 0xf0 && c <= 0xf4 ? 3 : 9;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
        if (need == 9) {
            mp_w_raw(out, fffd, 3), i++;
            continue;
        }
        size_t k = 1;
        for (; k <= need && i + k < n; k++) {
            uint8_t b = s[i + k];
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf))
                break;
        }
        if (k > need)
            mp_w_raw(out, s + i, need + 1), i += need + 1;
        else
            mp_w_raw(out, fffd, 3), i += k;
    }
}

/* stopping.py, in order: length; after min_new_tokens a stop id or an end-of-generation
 * id (unless ignore_eos); a stop string in the text of the output's tail. Then the echo's
 * own end: the prompt is all said. */
static finish_t finish_of(const req_t *q)
{
    finish_t f = { F_NONE, 0, NULL, 0, NULL };
    int64_t last = q->out[q->n_out - 1];
    if (q->n_out >= q->max_new)
        return (finish_t){ F_LENGTH, q->max_new, NULL, 0, NULL };
    if (q->n_out >= q->min_new) {
        for (uint32_t i = 0; i < q->n_stop_ids; i++)
            if (q->stop_ids[i] == last)
                return (finish_t){ F_STOP_ID, last, NULL, 0, NULL };
        if (last >= 0 && last < V.size && (V.flags[last] & 2) && !q->ignore_eos)
            return (finish_t){ F_STOP_ID, last, NULL, 0, NULL };
        if (q->n_stops) {
            uint32_t from = q->n_out > q->window ? q->n_out - q->window : 0;
            scratch_bytes.n = scratch_text.n = 0;
            for (uint32_t i = from; i < q->n_out; i++) {
                int64_t id = q->out[i];
                if (id >= 0 && id < V.size && !(q->skip_special && (V.flags[id] & 1)))
                    mp_w_raw(&scratch_bytes, V.tok[id], V.tok_len[id]);
            }
            utf8_lossy(scratch_bytes.d, scratch_bytes.n, &scratch_text);
            const char *text = (const char *)scratch_text.d;
            size_t len = scratch_text.n;
            if (V.strip_leading_space && len && text[0] == ' ') /* decoded from its start */
                text++, len--;
            for (uint32_t s = 0; s < q->n_stops && !scratch_text.oom; s++)
                if (len && memmem(text, len, q->stops[s], q->stop_len[s]))
                    return (finish_t){ F_STOP_STR, 0, q->stops[s], q->stop_len[s], NULL };
        }
    }
    if (q->n_out >= q->n_prompt)
        f.kind = F_STOP_NIL;
    return f;
}

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
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max)
        goto done;
    data = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (data && got < (size_t)st.st_size) {
        ssize_t n = read(fd, data + got, (size_t)st.st_size - got);
        if (n <= 0) {
            free(data);
            data = NULL;
            break;
        }
        got += (size_t)n;
    }
    if (data)
        data[got] = 0, *len = got;
done:
    if (fd >= 0)
        close(fd);
    return data;
}

/* Marks ids[] of an array<int> with flag; ids out of range are ignored. */
static int read_id_flags(mp_reader *r, uint8_t flag)
{
    uint32_t n;
    int64_t id;
    if (!mp_read_array(r, &n))
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!mp_read_int(r, &id))
            return 0;
        if (id >= 0 && id < V.size)
            V.flags[id] |= flag;
    }
    return 1;
}

static const char *load_vocab(const char *path)
{
    size_t len;
    mp_reader r;
    uint32_t pairs, n_tokens = 0;
    int64_t size = -1;
    const char *s;
    uint32_t n;
    if (!(V.file = read_file(path, &len, 1u << 30)))
        return "cannot read it";
    /* vocab_size sizes the id tables, so find it first. */
    mp_reader_init(&r, V.file, len);
    if (!mp_read_map(&r, &pairs))
        return "not a MessagePack map";
    for (uint32_t i = 0; i < pairs && !r.err; i++) {
        if (mp_read_str(&r, &s, &n) && mp_key_is(s, n, "vocab_size"))
            mp_read_int(&r, &size);
        else
            mp_skip(&r);
    }
    if (r.err || size < 0 || size > (1 << 24))
        return "no usable vocab_size";
    V.size = (uint32_t)size;
    V.tok = calloc(V.size + 1, sizeof *V.tok);
    V.tok_len = calloc(V.size + 1, sizeof *V.tok_len);
    V.flags = calloc(V.size + 1, 1);
    if (!V.tok || !V.tok_len || !V.flags)
        return "out of memory";
    int format_ok = 0;
    mp_reader_init(&r, V.file, len);
    mp_read_map(&r, &pairs);
    for (uint32_t i = 0; i < pairs && !r.err; i++) {
        if (!mp_read_str(&r, &s, &n))
            break;
        if (mp_key_is(s, n, "format")) {
            const char *f;
            uint32_t fn;
            format_ok = mp_read_str(&r, &f, &fn) && mp_key_is(f, fn, "switchboard-vocab/1");
        } else if (mp_key_is(s, n, "eog_token_ids")) {
            read_id_flags(&r, 2);
        } else if (mp_key_is(s, n, "special_token_ids")) {
            read_id_flags(&r, 1);
        } else if (mp_key_is(s, n, "strip_leading_space")) {
            mp_read_bool(&r, &V.strip_leading_space);
        } else if (mp_key_is(s, n, "eos_token_id")) {
            mp_obj o;
            if (mp_next(&r, &o) && o.type == MP_INT && o.i >= 0 && o.i < V.size)
                V.flags[o.i] |= 2; /* eog_token_ids includes it; be sure */
        } else if (mp_key_is(s, n, "tokens")) {
            mp_obj o;
            if (!mp_read_array(&r, &n_tokens) || n_tokens != V.size)
                return "tokens is not an array of vocab_size entries";
            for (uint32_t t = 0; t < n_tokens && mp_next(&r, &o); t++) {
                if (o.type != MP_BIN && o.type != MP_STR)
                    return "a token is not bytes";
                V.tok[t] = o.p, V.tok_len[t] = o.n;
            }
        } else {
            mp_skip(&r);
        }
    }
    if (r.err || r.p != r.end)
        return "not a valid MessagePack vocabulary map";
    if (!format_ok)
        return "format is not switchboard-vocab/1";
    return n_tokens == V.size ? NULL : "no tokens";
}

static char *read_key(const char *path)
{
    struct stat st;
    size_t len;
    if (stat(path, &st) < 0)
        die(2, "key file %s: cannot read it", path);
    if ((st.st_mode & 077) || st.st_uid != getuid()) /* 5.14: refuse a key others read */
        die(2, "key file %s: must be the current user's and not readable by group or "
               "others (chmod 600)", path);
    char *text = read_file(path, &len, 4096);
    if (!text)
        die(2, "key file %s: cannot read it", path);
    text[strcspn(text, "\r\n")] = 0; /* the first line, stripped */
    char *start = text + strspn(text, " \t");
    size_t n = strlen(start);
    while (n && (start[n - 1] == ' ' || start[n - 1] == '\t'))
        start[--n] = 0;
    memmove(text, start, n + 1);
    return text;
}

/* ipc:// (not abstract), tcp:// on a loopback host, or inproc:// (1.5). */
static int endpoint_ok(const char *e)
{
    if (strncmp(e, "ipc://", 6) == 0 || strncmp(e, "inproc://", 9) == 0)
        return e[6] != 0;
    if (strncmp(e, "tcp://", 6) != 0)
        return 0;
    return strncmp(e + 6, "127.", 4) == 0 || strncmp(e + 6, "localhost:", 10) == 0 ||
           strncmp(e + 6, "[::1]:", 6) == 0;
}

/* An ipc:// path on which a live process accepts is in use: libzmq would take it over. */
static int ipc_in_use(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path)
        return 0;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int used = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return used;
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
        if (zmq_bind(s, endpoint) < 0)
            die(1, "cannot bind %s: %s", endpoint, zmq_strerror(errno));
    } else {
        /* Nothing queued for a peer that is not connected: it waits in our backlog. */
        zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one);
        if (zmq_connect(s, endpoint) < 0)
            die(2, "cannot connect to %s: %s", endpoint, zmq_strerror(errno));
    }
    return s;
}

static const char *option(int argc, char **argv, const char *flag, const char *env)
{
    size_t n = strlen(flag);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], flag) == 0 && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], flag, n) == 0 && argv[i][n] == '=')
            return argv[i] + n + 1;
    }
    const char *v = env ? getenv(env) : NULL;
    return v && *v ? v : NULL;
}

static void check_args(int argc, char **argv)
{
    static const char *const flags[] = { "--inbound", "--events", "--outputs", "--key-file",
                                         "--vocab" };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: echo_engine [--inbound EP] [--events EP] [--outputs EP] "
                   "[--key-file PATH] [--vocab PATH]\n(defaults: SWITCHBOARD_ENGINE_INBOUND, "
                   "_EVENTS, _OUTPUTS, SWITCHBOARD_STACK_KEY or SWITCHBOARD_KEY_FILE, "
                   "SWITCHBOARD_VOCAB_FILE)\n");
            exit(0);
        }
        int known = 0;
        for (size_t f = 0; f < 5; f++) {
            size_t n = strlen(flags[f]);
            if (strcmp(argv[i], flags[f]) == 0 && i + 1 < argc)
                known = 2;
            else if (strncmp(argv[i], flags[f], n) == 0 && argv[i][n] == '=')
                known = 1;
            if (known)
                break;
        }
        if (!known)
            die(2, "unknown or incomplete argument %s (see --help)", argv[i]);
        i += known - 1;
    }
}

int main(int argc, char **argv)
{
    check_args(argc, argv);
    const char *inbound = option(argc, argv, "--inbound", "SWITCHBOARD_ENGINE_INBOUND");
    const char *ev = option(argc, argv, "--events", "SWITCHBOARD_ENGINE_EVENTS");
    const char *out = option(argc, argv, "--outputs", "SWITCHBOARD_ENGINE_OUTPUTS");
    const char *key_file = option(argc, argv, "--key-file", NULL);
    const char *vocab = option(argc, argv, "--vocab", "SWITCHBOARD_VOCAB_FILE");
    const char *parent = getenv("SWITCHBOARD_PARENT_PID");
    char *key_text = NULL;

    if (!inbound || !ev || !out)
        die(2, "missing endpoint: give --inbound, --events and --outputs (or %s)",
            "SWITCHBOARD_ENGINE_INBOUND, _EVENTS and _OUTPUTS");
    const char *eps[] = { inbound, ev, out };
    for (int i = 0; i < 3; i++)
        if (!endpoint_ok(eps[i]))
            die(2, "endpoint %s: not ipc://, inproc:// or a loopback tcp://", eps[i]);
    if (!vocab)
        die(2, "missing vocabulary: give --vocab or %s", "SWITCHBOARD_VOCAB_FILE");
    const char *why = load_vocab(vocab);
    if (why) {
        fprintf(stderr, "echo_engine: vocabulary %s: %s\n", vocab, why);
        return 2;
    }
    if (key_file || !getenv("SWITCHBOARD_STACK_KEY") || !*getenv("SWITCHBOARD_STACK_KEY")) {
        if (!key_file)
            key_file = getenv("SWITCHBOARD_KEY_FILE");
        if (key_file && *key_file)
            key = key_text = read_key(key_file);
        else
            fprintf(stderr, "echo_engine: no stack key: only a router without one accepts us\n");
    } else {
        key = getenv("SWITCHBOARD_STACK_KEY");
    }

    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (parent && *parent && getppid() != (pid_t)atol(parent))
        die(1, "parent %s is gone", parent);

    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* ZeroMQ's threads inherit a blocked mask, so signals reach this thread and wake
     * zmq_poll (EINTR). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    void *ctx = zmq_ctx_new();
    const char *ipc = strncmp(inbound, "ipc://", 6) == 0 ? inbound + 6 : NULL;
    if (ipc && ipc_in_use(ipc))
        die(1, "%s is in use by a running process", inbound);
    void *pull = open_socket(ctx, ZMQ_PULL, inbound);
    events.sock = open_socket(ctx, ZMQ_PUSH, ev);
    outputs.sock = open_socket(ctx, ZMQ_PUSH, out);
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    started_ns = now_ns(CLOCK_REALTIME);
    fprintf(stderr, "echo_engine: serving in pid %d on %s\n", (int)getpid(), inbound);
    long long next_step = 0, next_load = 0;
    while (!stopping) {
        long long now = now_ns(CLOCK_MONOTONIC);
        if (now >= next_load) {
            send_load();
            next_load = now + LOAD_NS;
            if (parent && *parent && getppid() != (pid_t)atol(parent))
                break; /* the kernel's SIGTERM is on its way; do not wait for it */
        }
        int busy = n_running > 0 && !paused;
        long long due = busy && next_step < next_load ? next_step : next_load;
        long timeout = due > now ? (long)((due - now) / 1000000) : 0;
        if (events.head || outputs.head)
            timeout = timeout < 10 ? timeout : 10;
        zmq_pollitem_t item = { pull, 0, ZMQ_POLLIN, 0 };
        zmq_poll(&item, 1, timeout < 100 ? timeout : 100);
        read_inbound(pull);
        flush(&events);
        flush(&outputs);
        now = now_ns(CLOCK_MONOTONIC);
        if (n_running > 0 && !paused && now >= next_step) {
            step();
            next_step = now + STEP_NS;
        }
    }

    /* Stop: give what is queued a second to leave, then close and remove the socket file. */
    int linger = 500;
    for (long long end = now_ns(CLOCK_MONOTONIC) + 1000000000LL;
         (events.head || outputs.head) && now_ns(CLOCK_MONOTONIC) < end;) {
        flush(&events);
        flush(&outputs);
        usleep(5000);
    }
    pusher *ps[] = { &events, &outputs };
    for (int i = 0; i < 2; i++) {
        while (ps[i]->head) {
            outmsg *m = ps[i]->head;
            ps[i]->head = m->next;
            counters[C_DROP_CLOSED]++;
            free_msg(m);
        }
        zmq_setsockopt(ps[i]->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(ps[i]->sock);
    }
    zmq_close(pull);
    zmq_ctx_term(ctx);
    if (ipc && ipc[0] != '@')
        unlink(ipc);
    while (n_running)
        remove_running(n_running - 1);
    free(last_op_head), free(last_op_tail), free(key_text);
    free(V.file), free(V.tok), free(V.tok_len), free(V.flags);
    mp_buf_free(&scratch_bytes), mp_buf_free(&scratch_text);

    fprintf(stderr, "echo_engine: stopped after %lld steps;", steps);
    for (int i = 0; i < C_COUNT; i++)
        if (counters[i])
            fprintf(stderr, " %s=%llu", counter_names[i], counters[i]);
    fputc('\n', stderr);
    return 0;
}
