/* mpack_lite: the small part of MessagePack the echo engine needs.
 *
 * Reader: a cursor over one buffer. Every call checks bounds and sets r->err on the first
 * problem (later calls then fail too), so a caller can read a whole structure and check
 * once. Every width of every type is accepted (docs/protocol.md section 3.1).
 * Writer: a growable buffer, smallest encodings; w->oom is set if an allocation failed.
 */
#ifndef MPACK_LITE_H
#define MPACK_LITE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { MP_NIL, MP_BOOL, MP_INT, MP_UINT, MP_FLOAT, MP_STR, MP_BIN, MP_ARRAY, MP_MAP,
               MP_EXT } mp_type;

typedef struct {
    mp_type type;
    int64_t i;      /* MP_BOOL (0 or 1), MP_INT (an integer that fits int64) */
    uint64_t u;     /* MP_UINT (above INT64_MAX) */
    double f;       /* MP_FLOAT */
    uint32_t n;     /* MP_STR, MP_BIN, MP_EXT: bytes; MP_ARRAY: items; MP_MAP: pairs */
    const char *p;  /* MP_STR, MP_BIN, MP_EXT: the bytes, inside the reader's buffer */
} mp_obj;

typedef struct {
    const uint8_t *p, *end;
    int err;
} mp_reader;

void mp_reader_init(mp_reader *r, const void *data, size_t len);
/* One object's tag: str, bin and ext data are consumed, array and map items are not. */
int mp_next(mp_reader *r, mp_obj *o);
/* Skip one whole object, nested ones included. */
int mp_skip(mp_reader *r);
/* Typed reads: 0, and r->err set, when the next object is not of the type. */
int mp_read(mp_reader *r, mp_obj *o, mp_type t);
int mp_read_int(mp_reader *r, int64_t *v);
int mp_read_bool(mp_reader *r, int *v);
int mp_read_str(mp_reader *r, const char **s, uint32_t *n);
int mp_read_array(mp_reader *r, uint32_t *n);
int mp_read_map(mp_reader *r, uint32_t *n);
/* The next key of a map of *left pairs still to read (counted down); 0 at its end. */
int mp_map_key(mp_reader *r, uint32_t *left, const char **k, uint32_t *n);
/* Whether str (s, n) is the C string lit. */
int mp_key_is(const char *s, uint32_t n, const char *lit);

typedef struct {
    uint8_t *d;
    size_t n, cap;
    int oom;
} mp_buf;

void mp_buf_free(mp_buf *w);
void mp_w_raw(mp_buf *w, const void *p, size_t n); /* bytes as they are */
void mp_w_nil(mp_buf *w);
void mp_w_bool(mp_buf *w, int v);
void mp_w_int(mp_buf *w, int64_t v);
void mp_w_f64(mp_buf *w, double v);
void mp_w_str(mp_buf *w, const char *s, size_t n);
void mp_w_cstr(mp_buf *w, const char *s);
void mp_w_array(mp_buf *w, uint32_t n);
void mp_w_map(mp_buf *w, uint32_t n);

#endif
