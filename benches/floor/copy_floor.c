/* The floor of a small-file tree copy: what any tool must at least do, and nothing else.
 *
 *   copy_floor SRC DST [THREADS]
 *
 * Phase 1 (one thread): read the tree under SRC with getdents and fstatat (the walk every tool
 * needs), create DST and its directories with mkdir.
 * Phase 2 (THREADS threads, default 2, files dealt round-robin): per regular file
 * open(src), open(dst, O_CREAT|O_EXCL), copy_file_range until done, fchmod, futimens, close x2.
 * Phase 3: directories' modes and times, deepest first.
 * No ownership, xattrs, links or error recovery: it is a yardstick for `cargo xtask bench`,
 * which copies a tree of regular files with it (issue 7: mfu-rs within 1.3x of this). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct item {
    char *src, *dst;
    struct stat st;
};

static struct item *files, *dirs;
static size_t nfiles, ndirs, capfiles, capdirs;
static int threads = 2;

static void die(const char *what, const char *path) {
    fprintf(stderr, "copy_floor: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

static void push(struct item **v, size_t *n, size_t *cap, char *src, char *dst, struct stat *st) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        *v = realloc(*v, *cap * sizeof **v);
    }
    (*v)[*n].src = src;
    (*v)[*n].dst = dst;
    (*v)[*n].st = *st;
    (*n)++;
}

static void walk(const char *src, const char *dst) {
    DIR *d = opendir(src);
    if (!d) die("opendir", src);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW)) die("stat", e->d_name);
        char *s = join(src, e->d_name), *t = join(dst, e->d_name);
        if (S_ISDIR(st.st_mode)) {
            if (mkdir(t, 0700)) die("mkdir", t);
            push(&dirs, &ndirs, &capdirs, s, t, &st);
            walk(s, t);
        } else if (S_ISREG(st.st_mode)) {
            push(&files, &nfiles, &capfiles, s, t, &st);
        }
    }
    closedir(d);
}

static void *copy(void *arg) {
    long me = (long)arg;
    for (size_t i = me; i < nfiles; i += threads) {
        struct item *f = &files[i];
        int in = open(f->src, O_RDONLY | O_CLOEXEC);
        if (in < 0) die("open", f->src);
        int out = open(f->dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (out < 0) die("create", f->dst);
        off_t left = f->st.st_size;
        while (left > 0) {
            ssize_t n = copy_file_range(in, NULL, out, NULL, left, 0);
            if (n <= 0) die("copy_file_range", f->src);
            left -= n;
        }
        struct timespec t[2] = {f->st.st_atim, f->st.st_mtim};
        if (fchmod(out, f->st.st_mode & 07777)) die("fchmod", f->dst);
        if (futimens(out, t)) die("futimens", f->dst);
        close(out);
        close(in);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: copy_floor SRC DST [THREADS]\n");
        return 2;
    }
    if (argc > 3) threads = atoi(argv[3]) > 0 ? atoi(argv[3]) : 1;
    struct stat st;
    if (stat(argv[1], &st)) die("stat", argv[1]);
    if (mkdir(argv[2], 0700)) die("mkdir", argv[2]);
    walk(argv[1], argv[2]);
    pthread_t tid[64];
    if (threads > 64) threads = 64;
    for (long i = 0; i < threads; i++) pthread_create(&tid[i], NULL, copy, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    /* Deepest first: the walk pushed parents before children. */
    for (size_t i = ndirs; i-- > 0;) {
        struct timespec t[2] = {dirs[i].st.st_atim, dirs[i].st.st_mtim};
        if (chmod(dirs[i].dst, dirs[i].st.st_mode & 07777)) die("chmod", dirs[i].dst);
        if (utimensat(AT_FDCWD, dirs[i].dst, t, 0)) die("utimensat", dirs[i].dst);
    }
    struct timespec t[2] = {st.st_atim, st.st_mtim};
    if (chmod(argv[2], st.st_mode & 07777) || utimensat(AT_FDCWD, argv[2], t, 0)) die("root", argv[2]);
    return 0;
}
