/* What the fake NCCL (fake_nccl.c) and the test that loads it through the drop-in agree on. */
#ifndef GNIO_TESTS_FAKE_NCCL_H
#define GNIO_TESTS_FAKE_NCCL_H

/* The version the fake reports unless FAKE_NCCL_VERSION says another: 2.28.7, so that it differs
 * from the drop-in's own (nccl.h's 2.28.9) and a call that lands in the drop-in instead shows. */
#define FAKE_NCCL_VERSION_CODE 22807

/* The byte a reduction of the fake writes over every byte of its output: from the call's
 * operator, type and the rank of the fake communicator, so a test sees that all three reached it
 * unchanged (and, from where the bytes end, the count). */
static inline unsigned char fake_nccl_marker(int op, int datatype, int rank) {
  return (unsigned char)(0x40 + 13 * op + 3 * datatype + 29 * rank);
}

/* The byte the fake writes over the first 16 bytes of an ncclDevComm it creates. */
#define FAKE_NCCL_DEVCOMM_BYTE 0x5d

/* Name of the fake's function that returns every call it took, one line each (see the fake). */
#define FAKE_NCCL_RECORD_FN "fake_nccl_record"

#endif
