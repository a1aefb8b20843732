/* mpack_lite: see mpack_lite.h. Written for the echo engine from the MessagePack spec. */
#include "mpack_lite.h"

#include <stdlib.h>
#include <string.h>

void mp_reader_init(mp_reader *r, const void *data, size_t len)
{
    r->p = data;
    r->end = r->p + len;
    r->err = 0;
}

static int take(mp_reader *r, size_t n, const uint8_t **out)
{
    if (r->err || (size_t)(r->end - r->p) < n) {
        r->err = 1;
        return 0;
    }
    *out = r->p;
    r->p += n;
    return 1;
}

static uint64_t be(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v = v << 8 | b[k];
    return v;
}

static int sized(mp_reader *r, mp_obj *o, mp_type t, int width)
{
    const uint8_t *b;
    if (!take(r, (size_t)width, &b))
        return 0;
    o->type = t;
    o->n = (uint32_t)be(b, width);
    if (t == MP_EXT && !take(r, 1, &b)) /* the ext's type byte */
        return 0;
    if (t == MP_STR || t == MP_BIN || t == MP_EXT) {
        if (!take(r, o->n, &b))
            return 0;
        o->p = (const char *)b;
    }
    return 1;
}

static int unsigned_int(mp_obj *o, uint64_t v)
{
    if (v > (uint64_t)INT64_MAX) {
        o->type = MP_UINT;
        o->u = v;
    } else {
        o->type = MP_INT;
        o->i = (int64_t)v;
    }
    return 1;
}

int mp_next(mp_reader *r, mp_obj *o)
{
    const uint8_t *b;
    if (!take(r, 1, &b))
        return 0;
    uint8_t c = *b;
    memset(o, 0, sizeof *o);
    if (c <= 0x7f)
        return unsigned_int(o, c);
    if (c >= 0xe0) {
        o->type = MP_INT;
        o->i = (int8_t)c;
        return 1;
    }
    if (c >= 0xa0 && c <= 0xbf) {
        o->n = c & 0x1f;
        o->type = MP_STR;
        if (!take(r, o->n, &b))
            return 0;
        o->p = (const char *)b;
        return 1;
    }
    if (c >= 0x90 && c <= 0x9f) {
        o->type = MP_ARRAY;
        o->n = c & 0x0f;
        return 1;
    }
    if (c >= 0x80 && c <= 0x8f) {
        o->type = MP_MAP;
        o->n = c & 0x0f;
        return 1;
    }
    switch (c) {
    case 0xc0: o->type = MP_NIL; return 1;
    case 0xc2: case 0xc3: o->type = MP_BOOL; o->i = c == 0xc3; return 1;
    case 0xc4: return sized(r, o, MP_BIN, 1);
    case 0xc5: return sized(r, o, MP_BIN, 2);
    case 0xc6: return sized(r, o, MP_BIN, 4);
    case 0xc7: return sized(r, o, MP_EXT, 1);
    case 0xc8: return sized(r, o, MP_EXT, 2);
    case 0xc9: return sized(r, o, MP_EXT, 4);
    case 0xca: case 0xcb: {
        int n = c == 0xca ? 4 : 8;
        if (!take(r, (size_t)n, &b))
            return 0;
        uint64_t bits = be(b, n);
        o->type = MP_FLOAT;
        if (n == 4) {
            uint32_t b32 = (uint32_t)bits;
            float f;
            memcpy(&f, &b32, 4);
            o->f = f;
        } else {
            memcpy(&o->f, &bits, 8);
        }
        return 1;
    }
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
        int n = 1 << (c - 0xcc);
        if (!take(r, (size_t)n, &b))
            return 0;
        return unsigned_int(o, be(b, n));
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        int n = 1 << (c - 0xd0);
        if (!take(r, (size_t)n, &b))
            return 0;
        uint64_t v = be(b, n);
        if (n < 8 && (v >> (8 * n - 1)) & 1) /* sign-extend */
            v |= ~(uint64_t)0 << (8 * n);
        o->type = MP_INT;
        o->i = (int64_t)v;
        return 1;
    }
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext: type + 1..16 bytes */
        o->type = MP_EXT;
        o->n = 1u << (c - 0xd4);
        if (!take(r, 1 + (size_t)o->n, &b))
            return 0;
        o->p = (const char *)b + 1;
        return 1;
    case 0xd9: return sized(r, o, MP_STR, 1);
    case 0xda: return sized(r, o, MP_STR, 2);
    case 0xdb: return sized(r, o, MP_STR, 4);
    case 0xdc: case 0xdd: case 0xde: case 0xdf: {
        int n = c & 1 ? 4 : 2;
        if (!take(r, (size_t)n, &b))
            return 0;
        o->type = c <= 0xdd ? MP_ARRAY : MP_MAP;
        o->n = (uint32_t)be(b, n);
        return 1;
    }
    default: /* 0xc1, never used */
        r->err = 1;
        return 0;
    }
}

int mp_skip(mp_reader *r)
{
    /* Iterative: each item takes at least one byte, so a lying count runs out of data. */
    uint64_t todo = 1;
    mp_obj o;
    while (todo--) {
        if (!mp_next(r, &o))
            return 0;
        if (o.type == MP_ARRAY)
            todo += o.n;
        else if (o.type == MP_MAP)
            todo += 2 * (uint64_t)o.n;
    }
    return 1;
}

static int want(mp_reader *r, mp_obj *o, mp_type t)
{
    if (!mp_next(r, o))
        return 0;
    if (o->type != t) {
        r->err = 1;
        return 0;
    }
    return 1;
}

int mp_read_int(mp_reader *r, int64_t *v)
{
    mp_obj o;
    if (!want(r, &o, MP_INT))
        return 0;
    *v = o.i;
    return 1;
}

int mp_read_num(mp_reader *r, double *v)
{
    mp_obj o;
    if (!mp_next(r, &o))
        return 0;
    if (o.type == MP_FLOAT)
        *v = o.f;
    else if (o.type == MP_INT)
        *v = (double)o.i;
    else if (o.type == MP_UINT)
        *v = (double)o.u;
    else {
        r->err = 1;
        return 0;
    }
    return 1;
}

int mp_read_bool(mp_reader *r, int *v)
{
    mp_obj o;
    if (!want(r, &o, MP_BOOL))
        return 0;
    *v = (int)o.i;
    return 1;
}

int mp_read_str(mp_reader *r, const char **s, uint32_t *n)
{
    mp_obj o;
    if (!want(r, &o, MP_STR))
        return 0;
    *s = o.p;
    *n = o.n;
    return 1;
}

int mp_read_array(mp_reader *r, uint32_t *n)
{
    mp_obj o;
    if (!want(r, &o, MP_ARRAY))
        return 0;
    *n = o.n;
    return 1;
}

int mp_read_map(mp_reader *r, uint32_t *n)
{
    mp_obj o;
    if (!want(r, &o, MP_MAP))
        return 0;
    *n = o.n;
    return 1;
}

int mp_key_is(const char *s, uint32_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* ---- writer ---- */

void mp_buf_free(mp_buf *w)
{
    free(w->d);
    w->d = NULL;
    w->n = w->cap = 0;
}

static void put(mp_buf *w, const void *src, size_t n)
{
    if (w->oom)
        return;
    if (w->cap - w->n < n) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->n < n)
            cap *= 2;
        uint8_t *d = realloc(w->d, cap);
        if (d == NULL) {
            w->oom = 1;
            return;
        }
        w->d = d;
        w->cap = cap;
    }
    memcpy(w->d + w->n, src, n);
    w->n += n;
}

static void put_be(mp_buf *w, uint8_t tag, uint64_t v, int n)
{
    uint8_t b[9];
    b[0] = tag;
    for (int k = 0; k < n; k++)
        b[1 + k] = (uint8_t)(v >> (8 * (n - 1 - k)));
    put(w, b, 1 + (size_t)n);
}

void mp_w_nil(mp_buf *w) { put_be(w, 0xc0, 0, 0); }
void mp_w_bool(mp_buf *w, int v) { put_be(w, v ? 0xc3 : 0xc2, 0, 0); }

void mp_w_uint(mp_buf *w, uint64_t v)
{
    if (v <= 0x7f)
        put_be(w, (uint8_t)v, 0, 0);
    else if (v <= 0xff)
        put_be(w, 0xcc, v, 1);
    else if (v <= 0xffff)
        put_be(w, 0xcd, v, 2);
    else if (v <= 0xffffffffu)
        put_be(w, 0xce, v, 4);
    else
        put_be(w, 0xcf, v, 8);
}

void mp_w_int(mp_buf *w, int64_t v)
{
    if (v >= 0)
        mp_w_uint(w, (uint64_t)v);
    else if (v >= -32)
        put_be(w, (uint8_t)(int8_t)v, 0, 0);
    else if (v >= INT8_MIN)
        put_be(w, 0xd0, (uint64_t)v & 0xff, 1);
    else if (v >= INT16_MIN)
        put_be(w, 0xd1, (uint64_t)v & 0xffff, 2);
    else if (v >= INT32_MIN)
        put_be(w, 0xd2, (uint64_t)v & 0xffffffffu, 4);
    else
        put_be(w, 0xd3, (uint64_t)v, 8);
}

void mp_w_f64(mp_buf *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    put_be(w, 0xcb, bits, 8);
}

void mp_w_str(mp_buf *w, const char *s, size_t n)
{
    if (n <= 31)
        put_be(w, (uint8_t)(0xa0 | n), 0, 0);
    else if (n <= 0xff)
        put_be(w, 0xd9, n, 1);
    else if (n <= 0xffff)
        put_be(w, 0xda, n, 2);
    else
        put_be(w, 0xdb, n, 4);
    put(w, s, n);
}

void mp_w_cstr(mp_buf *w, const char *s) { mp_w_str(w, s, strlen(s)); }
void mp_w_raw(mp_buf *w, const void *p, size_t n) { put(w, p, n); }

void mp_w_array(mp_buf *w, uint32_t n)
{
    if (n <= 15)
        put_be(w, (uint8_t)(0x90 | n), 0, 0);
    else if (n <= 0xffff)
        put_be(w, 0xdc, n, 2);
    else
        put_be(w, 0xdd, n, 4);
}

void mp_w_map(mp_buf *w, uint32_t n)
{
    if (n <= 15)
        put_be(w, (uint8_t)(0x80 | n), 0, 0);
    else if (n <= 0xffff)
        put_be(w, 0xde, n, 2);
    else
        put_be(w, 0xdf, n, 4);
}
