/* ckpt_writer.c — write a checkpoint the way a training job does: the whole
 * file from memory in large write() calls, then close(), without fsync.
 * Used by bench/write.sh.
 *
 *   ckpt_writer SRC DST [BLOCK_BYTES]
 *
 * SRC is mapped with MAP_POPULATE before the clock starts (write.sh has read
 * it into the page cache), so the timed part is only the file system under
 * DST: open(DST, O_WRONLY|O_CREAT|O_TRUNC, 0644), write() of BLOCK_BYTES
 * (default 4 MiB) at a time, close().  Prints one line:
 *
 *   bytes=N start_us=T0 end_us=T1 open=S write=S close=S total=S
 *
 * T0 and T1 are CLOCK_REALTIME in microseconds since the epoch (the clock of
 * bash's EPOCHREALTIME) at the call of open() and at the return of close();
 * open, write, close and total are the durations of those steps in seconds
 * (total = open() called .. close() returned).  Exit status 1 on any error,
 * including a short write or an error from close().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int64_t now_us(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: ckpt_writer SRC DST [BLOCK_BYTES]\n");
        return 2;
    }
    size_t block = argc == 4 ? strtoull(argv[3], NULL, 10) : (size_t)4 << 20;
    if (block == 0) {
        fprintf(stderr, "ckpt_writer: bad block size '%s'\n", argv[3]);
        return 2;
    }
    int src = open(argv[1], O_RDONLY);
    struct stat st;
    if (src < 0 || fstat(src, &st) != 0) {
        fprintf(stderr, "ckpt_writer: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    size_t size = (size_t)st.st_size;
    const char *data = "";
    if (size > 0) {
        data = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, src, 0);
        if (data == MAP_FAILED) {
            fprintf(stderr, "ckpt_writer: mmap %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
    }
    close(src);

    int64_t t0 = now_us(CLOCK_REALTIME), m0 = now_us(CLOCK_MONOTONIC);
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "ckpt_writer: %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    int64_t m1 = now_us(CLOCK_MONOTONIC);
    size_t done = 0;
    while (done < size) {
        size_t n = size - done < block ? size - done : block;
        ssize_t w = write(fd, data + done, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "ckpt_writer: write %s at %zu: %s\n", argv[2], done,
                    w < 0 ? strerror(errno) : "wrote nothing");
            return 1;
        }
        done += (size_t)w;
    }
    int64_t m2 = now_us(CLOCK_MONOTONIC);
    if (close(fd) != 0) {
        fprintf(stderr, "ckpt_writer: close %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    int64_t m3 = now_us(CLOCK_MONOTONIC), t1 = now_us(CLOCK_REALTIME);
    printf("bytes=%zu start_us=%lld end_us=%lld open=%.6f write=%.6f close=%.6f total=%.6f\n",
           size, (long long)t0, (long long)t1, (m1 - m0) / 1e6, (m2 - m1) / 1e6,
           (m3 - m2) / 1e6, (m3 - m0) / 1e6);
    return 0;
}
