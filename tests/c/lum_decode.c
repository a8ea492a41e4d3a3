/* iez-test-lum-decode: libiez's lov_user_md decoder (lum.c, iez_lum_decode) on a file of bytes,
 * for tests/test_collread.py to compare with iez.layout.lum.decode on tests/vectors/lum.
 *
 *   iez-test-lum-decode FILE
 *
 * Prints one line per component, "START END STRIPE_SIZE COUNT PATTERN OST,OST,..." (END -1 for
 * EOF; "-" when the OSTs are not all known), or "invalid". */
#include <stdio.h>
#include <stdlib.h>

#include "lum.h"

int main(int argc, char **argv)
{
    static unsigned char buf[1 << 20];
    FILE *f = argc == 2 ? fopen(argv[1], "rb") : NULL;
    if (!f)
        return 2;
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    struct iez_layout lay;
    if (iez_lum_decode(buf, n, &lay)) {
        puts("invalid");
        return 0;
    }
    for (uint32_t i = 0; i < lay.ncomp; i++) {
        const struct iez_comp *c = &lay.comp[i];
        printf("%llu %lld %llu %d %u ", (unsigned long long)c->start,
               c->end == IEZ_LUSTRE_EOF ? -1ll : (long long)c->end, (unsigned long long)c->s.size, c->s.count,
               c->s.pattern);
        for (uint32_t k = 0; k < c->s.nosts; k++)
            printf("%s%u", k ? "," : "", c->s.osts[k]);
        puts(c->s.nosts ? "" : "-");
    }
    iez_layout_free(&lay);
    return 0;
}
