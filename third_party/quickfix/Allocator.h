#ifndef FIX_ALLOCATOR_H
#define FIX_ALLOCATOR_H
#endif
