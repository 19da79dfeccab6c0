/* epoch_reader.c — the tierfs benchmark's file-system workloads.
 *
 *   epoch_reader walk DIR
 *       walk DIR recursively (readdir + lstat of every entry, one thread,
 *       like `find DIR | xargs stat`)
 *       prints: files=N dirs=N bytes=N secs=S
 *   epoch_reader read ROOT LIST THREADS SEED
 *       LIST holds "key<TAB>size" lines; shuffle them with SEED (SEED 0
 *       keeps the order), then THREADS threads each take the next key and
 *       read ROOT/key whole with 1 MiB read()s; a short or failed read, or a
 *       size other than the listed one, counts as an error
 *       prints: files=N bytes=N secs=S errors=N
 *   epoch_reader order LIST SEED
 *       print the keys of LIST in the order `read` would use
 *
 * Build: gcc -O2 -pthread -o epoch_reader epoch_reader.c
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (1 << 20)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------- walk --- */

static long long n_files, n_dirs, n_bytes, n_errors;

static void walk(int dirfd, const char *path)
{
    DIR *d = fdopendir(dirfd);
    struct dirent *e;

    if (d == NULL) {
        fprintf(stderr, "epoch_reader: opendir %s: %s\n", path, strerror(errno));
        close(dirfd);
        n_errors++;
        return;
    }
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            fprintf(stderr, "epoch_reader: stat %s/%s: %s\n", path, e->d_name,
                    strerror(errno));
            n_errors++;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            char sub[4096];
            int fd;
            n_dirs++;
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY);
            if (fd < 0) {
                fprintf(stderr, "epoch_reader: open %s: %s\n", sub, strerror(errno));
                n_errors++;
                continue;
            }
            walk(fd, sub);
        } else if (S_ISREG(st.st_mode)) {
            n_files++;
            n_bytes += st.st_size;
        }
    }
    closedir(d);
}

static int cmd_walk(const char *root)
{
    double t0 = now(), t1;
    int fd = open(root, O_RDONLY | O_DIRECTORY);

    if (fd < 0) {
        fprintf(stderr, "epoch_reader: open %s: %s\n", root, strerror(errno));
        return 1;
    }
    walk(fd, root);
    t1 = now();
    printf("files=%lld dirs=%lld bytes=%lld secs=%.6f errors=%lld\n", n_files,
           n_dirs, n_bytes, t1 - t0, n_errors);
    return n_errors ? 1 : 0;
}

/* ------------------------------------------------------------- list --- */

struct item {
    char *key;
    long long size;
};

static struct item *items;
static size_t n_items;

static int load_list(const char *file)
{
    FILE *f = fopen(file, "r");
    char line[4096];
    size_t cap = 0;

    if (f == NULL) {
        fprintf(stderr, "epoch_reader: %s: %s\n", file, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        char *tab = strchr(line, '\t');
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0')
            continue;
        if (n_items == cap) {
            cap = cap ? cap * 2 : 1024;
            items = realloc(items, cap * sizeof *items);
            if (items == NULL)
                abort();
        }
        if (tab != NULL) {
            *tab = '\0';
            items[n_items].size = atoll(tab + 1);
        } else {
            items[n_items].size = -1; /* unknown: not checked */
        }
        items[n_items].key = strdup(line);
        n_items++;
    }
    fclose(f);
    return 0;
}

/* splitmix64: a fixed, portable PRNG so an epoch's order is reproducible */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void shuffle(uint64_t seed)
{
    if (seed == 0)
        return;
    rng_state = seed;
    for (size_t i = n_items - 1; i > 0; i--) {
        size_t j = (size_t)(rng_next() % (i + 1));
        struct item t = items[i];
        items[i] = items[j];
        items[j] = t;
    }
}

/* ------------------------------------------------------------- read --- */

static const char *read_root;
static atomic_size_t next_item;
static atomic_llong total_bytes, total_errors, total_files;

static void *reader(void *arg)
{
    char *buf = malloc(BUF_SIZE);
    char path[8192];
    (void)arg;

    if (buf == NULL)
        abort();
    for (;;) {
        size_t i = atomic_fetch_add(&next_item, 1);
        long long got = 0;
        ssize_t r;
        int fd;

        if (i >= n_items)
            break;
        snprintf(path, sizeof path, "%s/%s", read_root, items[i].key);
        fd = open(path, O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "epoch_reader: open %s: %s\n", path, strerror(errno));
            atomic_fetch_add(&total_errors, 1);
            continue;
        }
        while ((r = read(fd, buf, BUF_SIZE)) > 0)
            got += r;
        if (r < 0) {
            fprintf(stderr, "epoch_reader: read %s: %s\n", path, strerror(errno));
            atomic_fetch_add(&total_errors, 1);
        } else if (items[i].size >= 0 && got != items[i].size) {
            fprintf(stderr, "epoch_reader: %s: read %lld bytes, expected %lld\n",
                    path, got, items[i].size);
            atomic_fetch_add(&total_errors, 1);
        }
        close(fd);
        atomic_fetch_add(&total_bytes, got);
        atomic_fetch_add(&total_files, 1);
    }
    free(buf);
    return NULL;
}

static int cmd_read(const char *root, const char *list, int threads, uint64_t seed)
{
    pthread_t *tid;
    double t0, t1;

    if (load_list(list) != 0 || n_items == 0)
        return 1;
    shuffle(seed);
    read_root = root;
    if (threads < 1)
        threads = 1;
    tid = calloc((size_t)threads, sizeof *tid);
    t0 = now();
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tid[i], NULL, reader, NULL) != 0)
            abort();
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    t1 = now();
    printf("files=%lld bytes=%lld secs=%.6f errors=%lld\n", (long long)total_files,
           (long long)total_bytes, t1 - t0, (long long)total_errors);
    free(tid);
    return total_errors ? 1 : 0;
}

static int cmd_order(const char *list, uint64_t seed)
{
    if (load_list(list) != 0)
        return 1;
    if (n_items)
        shuffle(seed);
    for (size_t i = 0; i < n_items; i++)
        printf("%s\n", items[i].key);
    return 0;
}

/* A non-negative decimal argument, or exit with a message. */
static unsigned long long arg_num(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0') {
        fprintf(stderr, "epoch_reader: %s '%s' is not a number\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "walk") == 0)
        return cmd_walk(argv[2]);
    if (argc == 6 && strcmp(argv[1], "read") == 0)
        return cmd_read(argv[2], argv[3], (int)arg_num(argv[4], "threads"), arg_num(argv[5], "seed"));
    if (argc == 4 && strcmp(argv[1], "order") == 0)
        return cmd_order(argv[2], arg_num(argv[3], "seed"));
    fprintf(stderr, "usage: epoch_reader walk DIR\n"
                    "       epoch_reader read ROOT LIST THREADS SEED\n"
                    "       epoch_reader order LIST SEED\n");
    return 2;
}
