/* The C interface between the core and an exchange between instances that
 * lives outside it (ext/mpi_exchange.cpp, ipuxl._mpi_exchange): plain C
 * types, so that the two modules agree on them without linking each other.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One message to or from one instance: `bytes` bytes at `data`. */
typedef struct ipuxl_block {
  int peer;      /* the other instance's index (never this instance's) */
  void* data;    /* sent from (read only) or received into */
  size_t bytes;  /* may be 0: the message still pairs the two instances */
} ipuxl_block;

/* Sends every `sends[i]` to its peer and receives every `recvs[i]` from its
 * peer, then waits for all of them. Messages between one pair of instances
 * match in the order they are listed (the peer lists the same messages, in
 * the same order, as its own sends / receives). Returns 0, or non-zero with
 * a message in err (err_len bytes). A wait past the exchange's timeout ends
 * the job (MPI_Abort) instead of returning: pending receives would write
 * into the caller's buffers later. */
typedef int (*ipuxl_exchange_blocks_fn)(void* ctx, const ipuxl_block* sends, size_t n_sends,
                                        const ipuxl_block* recvs, size_t n_recvs,
                                        const char* what, char* err, size_t err_len);

#ifdef __cplusplus
}
#endif
