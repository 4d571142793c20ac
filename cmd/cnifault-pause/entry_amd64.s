#include "textflag.h"

// rt0 is the binary's entry point (the Makefile links with -E main.rt0).
// pause.c installs its SIGTERM and SIGINT handlers in its first lines; the
// Go runtime installs its own only after a millisecond or more of start-up,
// and until then the kernel drops a SIGTERM sent to a PID 1 with the
// default disposition. A runtime that stops a sandbox it has just started
// (CRI-O's rollback after an NRI rejection, a Stop right after Run) then
// waits out its whole stop timeout, the request's deadline. So rt0 makes
// both signals end the process before anything else runs, and then starts
// the Go runtime, which replaces the handlers with its own.

// The kernel's struct sigaction: handler, flags (SA_RESTORER), restorer
// (never used: the handler does not return), mask.
DATA ·entryAction+0(SB)/8, $·exitAtEntry(SB)
DATA ·entryAction+8(SB)/8, $0x04000000
DATA ·entryAction+16(SB)/8, $·exitAtEntry(SB)
DATA ·entryAction+24(SB)/8, $0
GLOBL ·entryAction(SB), RODATA|NOPTR, $32

TEXT ·rt0(SB),NOSPLIT|NOFRAME,$0
	MOVQ	$15, DI // SIGTERM
	LEAQ	·entryAction(SB), SI
	MOVQ	$0, DX
	MOVQ	$8, R10 // sizeof(sigset_t)
	MOVQ	$13, AX // rt_sigaction
	SYSCALL
	MOVQ	$2, DI // SIGINT
	LEAQ	·entryAction(SB), SI
	MOVQ	$0, DX
	MOVQ	$8, R10
	MOVQ	$13, AX
	SYSCALL
	MOVB	$1, ·startedAtEntry(SB)
	JMP	_rt0_amd64_linux(SB)

// exitAtEntry ends the process with status 0, as pause.c's sigdown does.
TEXT ·exitAtEntry(SB),NOSPLIT|NOFRAME,$0
	MOVQ	$0, DI
	MOVQ	$231, AX // exit_group
	SYSCALL
	RET
