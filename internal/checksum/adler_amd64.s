#include "textflag.h"

// Weights of the 32 bytes of a block in s2 (32 for the first, 1 for the
// last), as signed bytes for VPMADDUBSW.
DATA adlerTaps<>+0(SB)/8, $0x191a1b1c1d1e1f20
DATA adlerTaps<>+8(SB)/8, $0x1112131415161718
DATA adlerTaps<>+16(SB)/8, $0x090a0b0c0d0e0f10
DATA adlerTaps<>+24(SB)/8, $0x0102030405060708
GLOBL adlerTaps<>(SB), RODATA|NOPTR, $32

DATA adlerOnes<>+0(SB)/8, $0x0001000100010001
DATA adlerOnes<>+8(SB)/8, $0x0001000100010001
DATA adlerOnes<>+16(SB)/8, $0x0001000100010001
DATA adlerOnes<>+24(SB)/8, $0x0001000100010001
GLOBL adlerOnes<>(SB), RODATA|NOPTR, $32

// func adler32Blocks(p []byte, out *[24]uint32)
TEXT ·adler32Blocks(SB), NOSPLIT, $0-32
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX
	MOVQ out+24(FP), DI
	VPXOR Y0, Y0, Y0 // zero
	VPXOR Y1, Y1, Y1 // byte sums (s1 lanes)
	VPXOR Y2, Y2, Y2 // prefix sums of the byte sums
	VPXOR Y3, Y3, Y3 // weighted sums within blocks
	VMOVDQU adlerTaps<>(SB), Y4
	VMOVDQU adlerOnes<>(SB), Y5
	SHRQ $5, CX
	JZ   done

loop:
	VMOVDQU    (SI), Y6
	VPADDD     Y1, Y2, Y2
	VPSADBW    Y0, Y6, Y7
	VPADDD     Y7, Y1, Y1
	VPMADDUBSW Y4, Y6, Y8
	VPMADDWD   Y5, Y8, Y8
	VPADDD     Y8, Y3, Y3
	ADDQ       $32, SI
	DECQ       CX
	JNZ        loop

done:
	VMOVDQU Y1, (DI)
	VMOVDQU Y2, 32(DI)
	VMOVDQU Y3, 64(DI)
	VZEROUPPER
	RET
