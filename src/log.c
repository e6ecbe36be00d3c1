/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — the one log formatter.
 *
 * Every line of every process goes through pd_log() as
 * "poold[PID]: LEVEL: message[: strerror]" on stderr, written with a single
 * write(2) so that the lines of the master and its workers never interleave.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "poold.h"

static int pd_log_max = PD_LOG_INFO;

static const char *const pd_log_names[] = {
    [PD_LOG_ERROR] = "error",
    [PD_LOG_WARN] = "warn",
    [PD_LOG_INFO] = "info",
    [PD_LOG_DEBUG] = "debug",
    [PD_LOG_TRACE] = "debug",
};

void pd_log_set_verbosity(int verbose)
{
    int max = PD_LOG_INFO + verbose;

    pd_log_max = max > PD_LOG_TRACE ? PD_LOG_TRACE : max;
}

bool pd_log_enabled(pd_log_level_t level)
{
    return (int)level <= pd_log_max;
}

void pd_log(pd_log_level_t level, int err, const char *fmt, ...)
{
    char line[4096];
    char ebuf[128];
    size_t n;
    int saved = errno;
    int k;
    va_list ap;

    if (!pd_log_enabled(level))
        return;

    k = snprintf(line, sizeof(line), "poold[%d]: %s: ", (int)getpid(),
                 pd_log_names[level]);
    n = (size_t)k;

    va_start(ap, fmt);
    k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    va_end(ap);
    n += k < 0 ? 0 : (size_t)k;
    if (n > sizeof(line) - 1)
        n = sizeof(line) - 1;

    if (err != 0 && n < sizeof(line) - 1) {
        /* The GNU strerror_r returns a pointer that may not be ebuf. */
        const char *text = strerror_r(err, ebuf, sizeof(ebuf));

        k = snprintf(line + n, sizeof(line) - n, ": %s", text);
        n += k < 0 ? 0 : (size_t)k;
        if (n > sizeof(line) - 1)
            n = sizeof(line) - 1;
    }
    line[n++] = '\n';

    /* Best effort: a log line that cannot be written has nowhere to go. */
    for (const char *p = line; n > 0;) {
        ssize_t w = write(STDERR_FILENO, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        n -= (size_t)w;
    }
    errno = saved;
}
