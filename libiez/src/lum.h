/* struct lov_user_md: the bytes that set a layout at create, through the LL_IOC_LOV_SETSTRIPE
 * ioctl or the lustre.lov xattr (references: l-abi-structs, l-abi-setstripe, l-abi-xattr).
 * Host byte order. */
#ifndef IEZ_LUM_H
#define IEZ_LUM_H

#include <stddef.h>

#include "layout.h"

#define IEZ_LOV_USER_MAGIC_V1 0x0BD10BD0u
#define IEZ_LOV_USER_MAGIC_V3 0x0BD30BD0u
#define IEZ_LOV_USER_MAGIC_SPECIFIC 0x0BD50BD0u
#define IEZ_LOV_USER_MAGIC_COMP_V1 0x0BD60BD0u

/* Bytes iez_lum_encode writes for lay. */
size_t iez_lum_size(const struct iez_layout *lay);
/* Encode as llapi_layout_to_lum() does: per component SPECIFIC with an OST list, V3 with a pool,
 * else V1; a lov_comp_md_v1 header for a composite layout. Returns the size, or 0 if cap is too
 * small. buf must be 8-byte aligned (the ioctl's requirement). */
size_t iez_lum_encode(const struct iez_layout *lay, void *buf, size_t cap);
/* lay encoded into a new buffer, malloc'd, 8-byte aligned and writable (the ioctl writes the
 * resulting layout back): the buffer with its size in *len, or NULL. */
void *iez_lum_alloc(const struct iez_layout *lay, size_t *len);
/* Number a composite layout's components 1..n in lcme_id, as an MDS stores them (a create
 * request carries 0); buf holds iez_lum_encode's bytes of lay. */
void iez_lum_number_components(void *buf, const struct iez_layout *lay);
/* The layout in n bytes read back from a file (the lustre.lov xattr, or user.lustre.lov on the
 * emulated cluster), as iez.layout.lum.decode reads it: components' extents, stripe size and
 * count, pattern, and each stripe's OST when every slot has an object (else nosts = 0). A stripe
 * count of -1 means "all OSTs" without objects to count. 0, or -1 when malformed or mirrored
 * (FLR). Free with iez_layout_free. */
int iez_lum_decode(const void *buf, size_t n, struct iez_layout *out);

#endif
