#ifndef CONFIG_H_IN
#define CONFIG_H_IN

#define HAVE_CXX17
/* #undef HAVE_STD_SHARED_PTR */
/* #undef HAVE_MYSQL */
/* #undef HAVE_POSTGRESQL */
/* #undef HAVE_SSL */

#endif
