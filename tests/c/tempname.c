/* The mkstemp family as an application calls it, for tests/test_tempname.py: run with and
 * without libiez, it must behave the same (glibc's semantics), and under libiez each file must
 * be placed and traced.
 *
 *   iez-test-tempname DIR
 *
 * Creates, in DIR, one file with each of mkstemp, mkostemp, mkstemps, mkostemps and their 64
 * variants (writing 1000 bytes to each), then 4 threads x 25 mkstemp and one mkstemp in a fork
 * child. Prints each created name ("FUNCTION NAME") and checks what glibc promises: the
 * template changed in place and only in its X's, O_RDWR, mode 0600 less the umask, the extra
 * flags honoured, errno kept on success, EINVAL (template untouched) for a bad template or
 * suffix length, EEXIST never for a free directory. Exits 1 with a line on stderr on any
 * difference. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;

static void fail(const char *what, const char *name)
{
    fprintf(stderr, "%s: %s (%s)\n", what, name, strerror(errno));
    exit(1);
}

/* A created file: its name kept the template's prefix and suffix, the X's became [A-Za-z0-9]. */
static void check(const char *fn, int fd, const char *tmpl, const char *name, int suffixlen, int flags)
{
    if (fd < 0)
        fail(fn, name);
    size_t len = strlen(name), x = len - suffixlen - 6;
    if (strlen(tmpl) != len || memcmp(tmpl, name, x) || strcmp(tmpl + x + 6, name + x + 6))
        fail("template changed outside its X's", name);
    for (size_t i = x; i < x + 6; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", name[i]))
            fail("not a letter or digit", name);
    int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
    if ((fl & O_ACCMODE) != O_RDWR || ((flags & O_APPEND) && !(fl & O_APPEND)) ||
        (!!(flags & O_CLOEXEC) != !!(fdfl & FD_CLOEXEC)))
        fail("flags", name);
    struct stat st;
    mode_t um = umask(0);
    umask(um);
    if (fstat(fd, &st) || (st.st_mode & 07777) != (0600 & ~um) || st.st_size != 0)
        fail("mode or size", name);
    char buf[1000];
    memset(buf, 'x', sizeof buf);
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf || close(fd))
        fail("write", name);
    printf("%s %s\n", fn, name);
}

#define TRY(fn, suffix, suffixlen, flags, call)                                  \
    {                                                                            \
        char t[4096], n[4096];                                                   \
        snprintf(t, sizeof t, "%s/" #fn ".XXXXXX%s", dir, suffix);               \
        strcpy(n, t);                                                            \
        errno = 4321;                                                            \
        int fd = call;                                                           \
        if (fd >= 0 && errno != 4321)                                            \
            fail("errno not kept", n);                                           \
        check(#fn, fd, t, n, suffixlen, flags);                                  \
    }

static void bad(const char *what, int r, const char *tmpl, const char *orig)
{
    if (r != -1 || errno != EINVAL || strcmp(tmpl, orig))
        fail(what, tmpl);
}

static void *thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 25; i++) {
        char t[4096];
        snprintf(t, sizeof t, "%s/thr.XXXXXX", dir);
        int fd = mkstemp(t);
        if (fd < 0 || close(fd))
            fail("thread mkstemp", t);
        flockfile(stdout);
        printf("thread %s\n", t);
        funlockfile(stdout);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    dir = argv[1];
    TRY(mkstemp, "", 0, 0, mkstemp(n));
    TRY(mkstemp64, "", 0, 0, mkstemp64(n));
    TRY(mkostemp, "", 0, O_APPEND | O_CLOEXEC, mkostemp(n, O_APPEND | O_CLOEXEC));
    TRY(mkostemp64, "", 0, O_CLOEXEC, mkostemp64(n, O_CLOEXEC | O_WRONLY)); /* access mode: O_RDWR all the same */
    TRY(mkstemps, ".txt", 4, 0, mkstemps(n, 4));
    TRY(mkstemps64, "-x", 2, 0, mkstemps64(n, 2));
    TRY(mkostemps, ".dat", 4, O_APPEND, mkostemps(n, 4, O_APPEND));
    TRY(mkostemps64, "", 0, O_CLOEXEC, mkostemps64(n, 0, O_CLOEXEC));

    char t[4096], o[4096];
    snprintf(t, sizeof t, "%s/short.XXXXX", dir);
    strcpy(o, t);
    bad("five X's", mkstemp(t), t, o);
    snprintf(t, sizeof t, "%s/suf.XXXXXX.txt", dir);
    strcpy(o, t);
    bad("suffix length -1", mkstemps(t, -1), t, o);
    bad("suffix beyond the X's", mkstemps(t, 5), t, o);
    bad("suffix longer than the name", mkostemps(t, 4000, 0), t, o);
    snprintf(t, sizeof t, "%s/no/such/dir.XXXXXX", dir);
    if (mkstemp(t) != -1 || errno != ENOENT)
        fail("missing directory", t);

    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&th[i], NULL, thread, NULL))
            fail("pthread_create", "");
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        TRY(child, "", 0, 0, mkstemp(n));
        fflush(stdout);
        _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        fail("fork child", "");
    return 0;
}
