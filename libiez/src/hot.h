/* The functions every create and traced open runs (wrapper, placement, the MDS's ALLOC, the
 * layout, the trace record, close): the compiler puts them in .text.hot and the linker puts those
 * together, in a few pages. Spread over the library's text, a create touched a dozen code pages,
 * each cold again after the process waited on the MDS (an iTLB miss, a long page walk in a
 * virtual machine): docs/libiez.md "Performance". */
#ifndef IEZ_HOT_H
#define IEZ_HOT_H

#define IEZ_HOT __attribute__((hot))

#endif
