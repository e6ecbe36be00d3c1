/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the few libc services the pool needs, without allocating.
 *
 * stdio may call malloc, and malloc is us: so the pool formats its own
 * messages (pool_vsnprintf_) and writes them with write(2) (pool_error_).
 */
#include "pool-internal.h"

#include <stdlib.h>
#include <string.h>

#include "prim/prim.h"

typedef struct pool_out_s {
    char *buf;
    size_t cap;
    size_t len; /* length the full output needs */
} pool_out_t;

static void out_char(pool_out_t *o, char c)
{
    if (o->len + 1 < o->cap)
        o->buf[o->len] = c;
    o->len++;
}

static void out_str(pool_out_t *o, const char *s)
{
    if (s == NULL)
        s = "(null)";
    while (*s)
        out_char(o, *s++);
}

static void out_unsigned(pool_out_t *o, unsigned long long v, unsigned base)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v > 0);
    while (n > 0)
        out_char(o, digits[--n]);
}

size_t pool_vsnprintf_(char *out, size_t cap, const char *fmt, va_list ap)
{
    pool_out_t o = { out, cap, 0 };
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            out_char(&o, *f);
            continue;
        }
        f++;
        int longs = 0;
        bool size_mod = false;
        while (*f == 'l') {
            longs++;
            f++;
        }
        if (*f == 'z') {
            size_mod = true;
            f++;
        }
        switch (*f) {
        case 'd':
        case 'i': {
            long long v = size_mod ? (long long)va_arg(ap, ssize_t)
                          : longs >= 2 ? va_arg(ap, long long)
                          : longs == 1 ? va_arg(ap, long)
                                       : va_arg(ap, int);
            unsigned long long mag = (unsigned long long)v;
            if (v < 0) {
                out_char(&o, '-');
                mag = 0 - mag;
            }
            out_unsigned(&o, mag, 10);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = size_mod ? va_arg(ap, size_t)
                                   : longs >= 2 ? va_arg(ap, unsigned long long)
                                   : longs == 1 ? va_arg(ap, unsigned long)
                                                : va_arg(ap, unsigned);
            out_unsigned(&o, v, *f == 'x' ? 16 : 10);
            break;
        }
        case 'p':
            out_str(&o, "0x");
            out_unsigned(&o, (uintptr_t)va_arg(ap, void *), 16);
            break;
        case 's':
            out_str(&o, va_arg(ap, const char *));
            break;
        case 'c':
            out_char(&o, (char)va_arg(ap, int));
            break;
        case '%':
            out_char(&o, '%');
            break;
        case '\0':
            f--;
            break;
        default:
            out_char(&o, '%');
            out_char(&o, *f);
            break;
        }
    }
    if (cap > 0)
        out[o.len < cap ? o.len : cap - 1] = '\0';
    return o.len;
}

size_t pool_snprintf_(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = pool_vsnprintf_(out, cap, fmt, ap);
    va_end(ap);
    return n;
}

static void pool_verror(int err, const char *fmt, va_list ap)
{
    char line[512];
    size_t n = pool_snprintf_(line, sizeof line, "shmpool: ");
    n += pool_vsnprintf_(line + n, sizeof line - n, fmt, ap);
    if (n >= sizeof line)
        n = sizeof line - 1;
    if (err != 0) {
        /* strerror may translate (and allocate); the errno name does not. */
        const char *name = strerrorname_np(err);
        if (name != NULL)
            n += pool_snprintf_(line + n, sizeof line - n, ": %s", name);
        else
            n += pool_snprintf_(line + n, sizeof line - n, ": errno %d", err);
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    if (n + 1 < sizeof line)
        line[n++] = '\n';
    else
        line[sizeof line - 1] = '\n';
    pool_prim_write_(2, line, n < sizeof line ? n : sizeof line);
}

void pool_error_(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pool_verror(err, fmt, ap);
    va_end(ap);
}

void pool_fatal_(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pool_verror(0, fmt, ap);
    va_end(ap);
    abort();
}

void pool_assert_fail_(const char *cond, const char *file, int line)
{
    pool_fatal_("assertion failed: %s (%s:%d)", cond, file, line);
}

bool pool_parse_size_(const char *v, size_t *out, const char **end)
{
    size_t n = 0;
    const char *d = v;
    if (*d < '0' || *d > '9')
        return false;
    for (; *d >= '0' && *d <= '9'; d++) {
        if (n > (SIZE_MAX - 9) / 10)
            return false;
        n = n * 10 + (size_t)(*d - '0');
    }
    unsigned shift = 0;
    switch (*d) {
    case 'k': case 'K': shift = 10; d++; break;
    case 'm': case 'M': shift = 20; d++; break;
    case 'g': case 'G': shift = 30; d++; break;
    default: break;
    }
    if ((end == NULL && *d != '\0') || n > (SIZE_MAX >> shift))
        return false;
    if (end != NULL)
        *end = d;
    *out = n << shift;
    return true;
}
