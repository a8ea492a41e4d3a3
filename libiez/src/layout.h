/* A Lustre file layout as libiez holds it: plain RAID-0 striping or PFL components.
 * Field meanings follow src/iez/layout/layout.py (references: l-abi-structs). */
#ifndef IEZ_LAYOUT_H
#define IEZ_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define IEZ_LUSTRE_EOF UINT64_MAX
#define IEZ_MIN_STRIPE_SIZE 65536u     /* LOV_MIN_STRIPE_SIZE: sizes are multiples of 64 KiB */
#define IEZ_STRIPE_SIZE_LIMIT (1ull << 32) /* stripe size must be < 4 GiB */
#define IEZ_MAX_STRIPE_COUNT 2000      /* LOV_MAX_STRIPE_COUNT */
#define IEZ_MAX_OST_INDEX 0xFFFE
#define IEZ_MAXPOOLNAME 15             /* LOV_MAXPOOLNAME */
#define IEZ_PATTERN_RAID0 0x1u

struct iez_stripe {                    /* one RAID-0 layout: a plain file's or a component's body */
    uint64_t size;                     /* bytes; 0 = file-system default */
    int32_t count;                     /* 0 = default, -1 = every OST */
    int32_t offset;                    /* first OST; -1 = any */
    uint32_t pattern;                  /* lmm_pattern, RAID0 unless a caller says otherwise */
    uint32_t pool_len;
    char pool[IEZ_MAXPOOLNAME + 1];
    uint32_t nosts;                    /* explicit OST list (a SPECIFIC layout) */
    uint16_t *osts;
};

struct iez_comp {
    uint64_t start, end;               /* extent [start, end); end IEZ_LUSTRE_EOF = to EOF */
    struct iez_stripe s;
};

/* A plain layout is one component [0, EOF) with composite == 0. The arrays belong to the
 * layout (iez_layout_free); the parser sizes them from the text it reads. */
struct iez_layout {
    int composite;
    uint32_t ncomp;
    struct iez_comp *comp;
    size_t comp_cap, osts_cap;
    uint16_t *osts_mem;
};

/* Parse a layout in the plan grammar (docs/plan-format.md) and apply every rule of
 * iez.layout.layout (validate_plain, validate_components). 0, or -1 with a message in err. */
int iez_layout_parse(const char *spec, size_t len, struct iez_layout *out, char *err, size_t errlen);

/* The canonical text of a layout, as iez.plan.format_layout writes it; the length, or -1 if
 * cap is too small. */
int iez_layout_format(const struct iez_layout *lay, char *buf, size_t cap);

void iez_layout_free(struct iez_layout *lay);

#endif
