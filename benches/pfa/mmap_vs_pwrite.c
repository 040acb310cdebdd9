/* Issue 36: may ranks fill their chunk slots of one shared file through a MAP_SHARED mapping
 * (the seed's pfa_mmap) faster than with pwrite? T threads each write ROWS chunks of 1 MiB at
 * PFA's slot offsets ((row * T + rank + 1) MiB) of one file, then one fdatasync; MB/s (10^6
 * bytes a second, all threads, the sync included). Modes:
 *   pwrite   one pwrite per chunk (PFA's buffered writes, without its copy into the buffer)
 *   mmap     fallocate of the slot (reserves its blocks, so a full file system fails here, not
 *            with SIGBUS at a page fault), mmap, memcpy, munmap
 *   populate as mmap, the mapping prefaulted with MADV_POPULATE_WRITE before the memcpy
 *   nn       N-N for comparison: a file per thread, one pwrite per chunk (not synced)
 * Build and run (not part of the bench section; the README's PFA section gives its numbers):
 *   gcc -O2 -pthread benches/pfa/mmap_vs_pwrite.c -o /tmp/mmap_vs_pwrite
 *   /tmp/mmap_vs_pwrite 8 mmap /dev/shm/mmap-test      (the file is removed at the end) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum mode { PWRITE, MMAP, POPULATE, NN };
static const long CHUNK = 1 << 20, ROWS = 33;
static int fd, fds[64], threads;
static enum mode mode;
static char *src;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void *rank(void *arg) {
    long r = (long)arg;
    for (long i = 0; i < ROWS; i++) {
        off_t at = (i * threads + r + 1) * CHUNK;
        if (mode == PWRITE) {
            if (pwrite(fd, src, CHUNK, at) != CHUNK) die("pwrite");
        } else if (mode == NN) {
            if (pwrite(fds[r], src, CHUNK, i * CHUNK) != CHUNK) die("pwrite");
        } else {
            if (fallocate(fd, 0, at, CHUNK)) die("fallocate");
            char *m = mmap(0, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, at);
            if (m == MAP_FAILED) die("mmap");
            if (mode == POPULATE && madvise(m, CHUNK, MADV_POPULATE_WRITE)) die("madvise");
            memcpy(m, src, CHUNK);
            if (munmap(m, CHUNK)) die("munmap");
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *names[] = {"pwrite", "mmap", "populate", "nn"};
    if (argc != 4 || (threads = atoi(argv[1])) < 1 || threads > 64) {
        fprintf(stderr, "usage: %s THREADS pwrite|mmap|populate|nn FILE\n", argv[0]);
        return 2;
    }
    for (mode = 0; mode < 4 && strcmp(argv[2], names[mode]); mode++);
    if (mode == 4) die("mode");
    src = malloc(CHUNK);
    memset(src, 7, CHUNK);
    if ((fd = open(argv[3], O_RDWR | O_CREAT | O_EXCL, 0644)) < 0) die("open");
    for (int i = 0; mode == NN && i < threads; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s.%d", argv[3], i);
        if ((fds[i] = open(p, O_RDWR | O_CREAT | O_EXCL, 0644)) < 0) die("open");
        unlink(p);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_t t[64];
    for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, rank, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    if (fdatasync(fd)) die("fdatasync");
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    printf("threads=%d mode=%s mb_s=%.0f\n", threads, names[mode], threads * ROWS * CHUNK / s / 1e6);
    unlink(argv[3]);
    return 0;
}
