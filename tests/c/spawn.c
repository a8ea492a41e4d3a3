/* vfork and posix_spawn with traced files open (tests/test_libiez_programs.py).
 *
 *   iez-test-spawn DIR
 *
 * Opens DIR/parent and writes 100 bytes; vforks a child that closes DIR/parent's descriptor
 * (in the shared memory of the parent) and _exits; writes 200 bytes more; posix_spawns
 * `sh -c 'printf 12345 > DIR/spawned'` and waits; writes 300 bytes more and closes. The
 * parent's record must say 600 bytes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int put(int fd, int n)
{
    char buf[512];
    memset(buf, 'z', sizeof buf);
    return write(fd, buf, (size_t)n) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char path[4096], cmd[4200];
    snprintf(path, sizeof path, "%s/parent", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || put(fd, 100))
        return 1;
    pid_t pid = vfork();
    if (pid == 0) {
        close(fd);
        _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || put(fd, 200))
        return 1;
    snprintf(cmd, sizeof cmd, "printf 12345 > %s/spawned", argv[1]);
    char *args[] = {"sh", "-c", cmd, NULL};
    if (posix_spawnp(&pid, "sh", NULL, NULL, args, environ) || waitpid(pid, &status, 0) != pid ||
        !WIFEXITED(status) || WEXITSTATUS(status))
        return 1;
    if (put(fd, 300))
        return 1;
    return close(fd);
}
