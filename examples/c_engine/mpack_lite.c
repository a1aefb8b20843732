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

/* The next n bytes, or NULL (and r->err) when the buffer has fewer. */
static const uint8_t *take(mp_reader *r, size_t n)
{
    if (r->err || (size_t)(r->end - r->p) < n) {
        r->err = 1;
        return NULL;
    }
    r->p += n;
    return r->p - n;
}

static int be(mp_reader *r, int n, uint64_t *v)
{
    const uint8_t *b = take(r, (size_t)n);
    *v = 0;
    for (int k = 0; b && k < n; k++)
        *v = *v << 8 | b[k];
    return b != NULL;
}

static int integer(mp_obj *o, uint64_t v, int is_signed)
{
    o->type = is_signed || v <= (uint64_t)INT64_MAX ? MP_INT : MP_UINT;
    o->i = (int64_t)v, o->u = v;
    return 1;
}

/* str, bin, ext: the length (in `width` bytes, or `fixed` when width is 0), the ext's
 * type byte, then the data. */
static int bytes(mp_reader *r, mp_obj *o, mp_type t, int width, uint32_t fixed)
{
    uint64_t n = fixed;
    if ((width && !be(r, width, &n)) || (t == MP_EXT && !take(r, 1)))
        return 0;
    o->type = t, o->n = (uint32_t)n;
    return (o->p = (const char *)take(r, o->n)) != NULL;
}

int mp_next(mp_reader *r, mp_obj *o)
{
    const uint8_t *b = take(r, 1);
    uint64_t v;
    memset(o, 0, sizeof *o);
    if (!b)
        return 0;
    uint8_t c = *b;
    if (c <= 0x7f)
        return integer(o, c, 0);
    if (c >= 0xe0)
        return integer(o, (uint64_t)(int64_t)(int8_t)c, 1);
    if (c <= 0x8f || (c >= 0x90 && c <= 0x9f)) {
        o->type = c <= 0x8f ? MP_MAP : MP_ARRAY, o->n = c & 0x0f;
        return 1;
    }
    if (c <= 0xbf)
        return bytes(r, o, MP_STR, 0, c & 0x1f);
    switch (c) {
    case 0xc0: o->type = MP_NIL; return 1;
    case 0xc2: case 0xc3: o->type = MP_BOOL, o->i = c == 0xc3; return 1;
    case 0xc4: case 0xc5: case 0xc6: return bytes(r, o, MP_BIN, 1 << (c - 0xc4), 0);
    case 0xc7: case 0xc8: case 0xc9: return bytes(r, o, MP_EXT, 1 << (c - 0xc7), 0);
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
        return bytes(r, o, MP_EXT, 0, 1u << (c - 0xd4));
    case 0xd9: case 0xda: case 0xdb: return bytes(r, o, MP_STR, 1 << (c - 0xd9), 0);
    case 0xca: case 0xcb:
        if (!be(r, c == 0xca ? 4 : 8, &v))
            return 0;
        o->type = MP_FLOAT;
        if (c == 0xca) {
            uint32_t bits = (uint32_t)v;
            float f;
            memcpy(&f, &bits, 4);
            o->f = f;
        } else {
            memcpy(&o->f, &v, 8);
        }
        return 1;
    case 0xcc: case 0xcd: case 0xce: case 0xcf:
        return be(r, 1 << (c - 0xcc), &v) && integer(o, v, 0);
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        int n = 1 << (c - 0xd0);
        if (!be(r, n, &v))
            return 0;
        if (n < 8 && (v >> (8 * n - 1)) & 1) /* sign-extend */
            v |= ~(uint64_t)0 << (8 * n);
        return integer(o, v, 1);
    }
    case 0xdc: case 0xdd: case 0xde: case 0xdf:
        o->type = c <= 0xdd ? MP_ARRAY : MP_MAP;
        if (!be(r, c & 1 ? 4 : 2, &v))
            return 0;
        o->n = (uint32_t)v;
        return 1;
    default: /* 0xc1 is never used */
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
        todo += o.type == MP_ARRAY ? o.n : o.type == MP_MAP ? 2 * (uint64_t)o.n : 0;
    }
    return 1;
}

int mp_read(mp_reader *r, mp_obj *o, mp_type t)
{
    if (mp_next(r, o) && o->type == t)
        return 1;
    r->err = 1;
    return 0;
}

int mp_read_int(mp_reader *r, int64_t *v)
{
    mp_obj o;
    return mp_read(r, &o, MP_INT) ? (*v = o.i, 1) : 0;
}

int mp_read_bool(mp_reader *r, int *v)
{
    mp_obj o;
    return mp_read(r, &o, MP_BOOL) ? (*v = (int)o.i, 1) : 0;
}

int mp_read_str(mp_reader *r, const char **s, uint32_t *n)
{
    mp_obj o;
    return mp_read(r, &o, MP_STR) ? (*s = o.p, *n = o.n, 1) : 0;
}

int mp_read_array(mp_reader *r, uint32_t *n)
{
    mp_obj o;
    return mp_read(r, &o, MP_ARRAY) ? (*n = o.n, 1) : 0;
}

int mp_read_map(mp_reader *r, uint32_t *n)
{
    mp_obj o;
    return mp_read(r, &o, MP_MAP) ? (*n = o.n, 1) : 0;
}

int mp_map_key(mp_reader *r, uint32_t *left, const char **k, uint32_t *n)
{
    if (r->err || *left == 0)
        return 0;
    (*left)--;
    return mp_read_str(r, k, n);
}

int mp_key_is(const char *s, uint32_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* ---- writer ---- */

void mp_buf_free(mp_buf *w)
{
    free(w->d);
    memset(w, 0, sizeof *w);
}

void mp_w_raw(mp_buf *w, const void *src, size_t n)
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
        w->d = d, w->cap = cap;
    }
    memcpy(w->d + w->n, src, n);
    w->n += n;
}

/* A tag byte, then v big-endian in n bytes. */
static void tag(mp_buf *w, uint8_t t, uint64_t v, int n)
{
    uint8_t b[9] = { t };
    for (int k = 0; k < n; k++)
        b[1 + k] = (uint8_t)(v >> (8 * (n - 1 - k)));
    mp_w_raw(w, b, 1 + (size_t)n);
}

/* The smallest of a fix form (fix | v, when v <= fix_max) and tags t8, t16, t32 (0: none). */
static void sized(mp_buf *w, uint8_t fix, uint64_t fix_max, uint8_t t8, uint8_t t16,
                  uint8_t t32, uint64_t v)
{
    if (v <= fix_max)
        tag(w, (uint8_t)(fix | v), 0, 0);
    else if (t8 && v <= 0xff)
        tag(w, t8, v, 1);
    else if (v <= 0xffff)
        tag(w, t16, v, 2);
    else
        tag(w, t32, v, 4);
}

void mp_w_nil(mp_buf *w) { tag(w, 0xc0, 0, 0); }
void mp_w_bool(mp_buf *w, int v) { tag(w, v ? 0xc3 : 0xc2, 0, 0); }
void mp_w_array(mp_buf *w, uint32_t n) { sized(w, 0x90, 15, 0, 0xdc, 0xdd, n); }
void mp_w_map(mp_buf *w, uint32_t n) { sized(w, 0x80, 15, 0, 0xde, 0xdf, n); }
void mp_w_cstr(mp_buf *w, const char *s) { mp_w_str(w, s, strlen(s)); }

void mp_w_str(mp_buf *w, const char *s, size_t n)
{
    sized(w, 0xa0, 31, 0xd9, 0xda, 0xdb, n);
    mp_w_raw(w, s, n);
}

void mp_w_int(mp_buf *w, int64_t v)
{
    if (v >= 0 && v <= 0xffffffffLL)
        sized(w, 0, 0x7f, 0xcc, 0xcd, 0xce, (uint64_t)v);
    else if (v >= -32 && v < 0)
        tag(w, (uint8_t)(int8_t)v, 0, 0);
    else
        tag(w, v < 0 ? 0xd3 : 0xcf, (uint64_t)v, 8); /* int 64, or uint 64 */
}

void mp_w_f64(mp_buf *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    tag(w, 0xcb, bits, 8);
}
