/* A module of libiez: a part with state of its own across the process's life, as Darshan's
 * runtime modules are. core.c holds the table of modules and walks it: init and the fork hooks
 * in table order, fini in reverse, so a module may use the modules before it in the table.
 * A hook a module does not need is NULL. */
#ifndef IEZ_MODULE_H
#define IEZ_MODULE_H

struct iez_module {
    const char *name;
    /* Once per process, the configuration read (state.h), inside libiez's recursion guard. */
    void (*init)(void);
    /* pthread_atfork: before fork, in the parent after it, in the child (whose parent's
     * connections, locks and records are not its own). */
    void (*fork_prepare)(void);
    void (*fork_parent)(void);
    void (*fork_child)(void);
    /* Process end (exit, _exit), in the process that owns the state. */
    void (*fini)(void);
};

extern const struct iez_module iez_log_module, iez_iolog_module, iez_trace_module, iez_access_module;

#endif
