/* A create in a vfork child (tests/test_libiez_hardening.py).
 *
 *   iez-test-vforkcreate CHILD [FIRST]
 *
 * With FIRST, the parent first creates FIRST itself (so libiez has loaded its plan); then it
 * vforks a child that creates CHILD (O_WRONLY|O_CREAT|O_EXCL, 0644), writes 10 bytes, closes it
 * and _exits with 0, or 1 on failure. The parent exits with the child's status. */
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static int create(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    return fd >= 0 && write(fd, "0123456789", 10) == 10 && close(fd) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (argc > 2 && create(argv[2])))
        return 2;
    pid_t pid = vfork();
    if (pid == 0)
        _exit(create(argv[1]));
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 3;
    return WEXITSTATUS(status);
}
