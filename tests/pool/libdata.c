/* SPDX-License-Identifier: BSD-2-Clause */
/* What a forked child writes of the library's own data is one page or
 * two of .bss, never a page of the tables written before the fork
 * (POOL_READ_MOSTLY, shm/libshmpool.ld): every page a child writes there
 * becomes its own copy, which a prefork server pays once per worker.
 * tests/pool/libdata.sh runs it under LD_PRELOAD=libshmpool.so
 * SHMPOOL_MODE=children.
 *
 * The private master finds the library's writable segment, forks
 * children that attach, allocate and free in every class, take a second
 * thread and sleep in a cut poll, and each counts the segment's pages it
 * holds alone (/proc/self/pagemap: present and mapped once, so a copy of
 * its own; a page it only read is still the parent's too).  None of them
 * may hold file data (.data, the tables); the .bss pages past them may be
 * copied.  Prints the counts on one line; exit 0, otherwise one line on
 * stderr and exit 1.
 */
#include "config.h"

#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../programs/preloaded.h"

#define CHILDREN 4
#define PM_PRESENT (1ull << 63)
#define PM_EXCLUSIVE (1ull << 56)

/* The library's writable segment: pages [first, data_end) hold file data,
 * [data_end, end) only .bss. */
static uintptr_t first, data_end, end;
static uintptr_t page;

static int find_segment(struct dl_phdr_info *info, size_t size, void *base)
{
    (void)size;
    if (info->dlpi_addr != (uintptr_t)base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        first = start & ~(page - 1);
        data_end = (start + ph->p_filesz + page - 1) & ~(page - 1);
        end = (start + ph->p_memsz + page - 1) & ~(page - 1);
        return 1;
    }
    return 0;
}

static void *second_thread(void *arg)
{
    for (int i = 0; i < 100; i++)
        free(malloc((size_t)(i + 1) * 24));
    return arg;
}

/* The child's own pages among [from, to), or -1. */
static long own_pages(uintptr_t from, uintptr_t to)
{
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0)
        return -1;
    long own = 0;
    for (uintptr_t p = from; p < to; p += page) {
        uint64_t e;
        if (pread(fd, &e, sizeof e, (off_t)(p / page * sizeof e)) != (ssize_t)sizeof e) {
            own = -1;
            break;
        }
        own += (e & PM_PRESENT) && (e & PM_EXCLUSIVE);
    }
    close(fd);
    return own;
}

/* A child: a worker's first request, then the counts on the pipe. */
static void child(int out_fd)
{
    static void *blocks[2000];
    size_t n = 0;
    for (size_t size = 8; size <= (size_t)1 << 20; size += size / 8 + 8)
        if (n < sizeof blocks / sizeof blocks[0])
            blocks[n++] = malloc(size);
    for (size_t i = 0; i < n; i++)
        free(blocks[i]);
    pthread_t t;
    if (pthread_create(&t, NULL, second_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
        _exit(2);
    poll(NULL, 0, 1);
    long counts[2] = { own_pages(first, data_end), own_pages(data_end, end) };
    if (!pool_attached_p() || write(out_fd, counts, sizeof counts) != (ssize_t)sizeof counts)
        _exit(1);
    _exit(0);
}

int main(void)
{
    if (!preloaded_master("libdata"))
        return 1;
    page = (uintptr_t)sysconf(_SC_PAGESIZE);
    Dl_info info;
    if (dladdr((void *)pool_owns_p, &info) == 0 ||
        dl_iterate_phdr(find_segment, info.dli_fbase) == 0) {
        fprintf(stderr, "libdata: cannot find libshmpool's writable segment\n");
        return 1;
    }
    /* The master writes its own .bss first, as a server's master does. */
    free(malloc(100));
    long bss_pages = (long)((end - data_end) / page), worst_bss = 0;
    for (int i = 0; i < CHILDREN; i++) {
        int fds[2];
        if (pipe(fds) != 0)
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            child(fds[1]);
        }
        close(fds[1]);
        long counts[2];
        ssize_t got = pid < 0 ? -1 : read(fds[0], counts, sizeof counts);
        close(fds[0]);
        int status = 0;
        if (pid > 0)
            waitpid(pid, &status, 0);
        if (got != (ssize_t)sizeof counts || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            counts[0] < 0 || counts[1] < 0) {
            fprintf(stderr, "libdata: child %d did not attach and count its pages\n", i);
            return 1;
        }
        if (counts[0] != 0) {
            fprintf(stderr, "libdata: child %d copied %ld page(s) of the library's file data "
                    "(.data or the tables), which every worker then pays\n", i, counts[0]);
            return 1;
        }
        if (counts[1] > worst_bss)
            worst_bss = counts[1];
    }
    printf("libdata: %d children copied 0 pages of the library's file data and at most %ld of "
           "its %ld .bss page(s)\n", CHILDREN, worst_bss, bss_pages);
    return 0;
}
