/* A runtime library whose exports start with instructions a uprobe must single-step,
 * for the probe placement tests. Each function is called as int f(void *).
 *
 * hipStreamSynchronize: test + mov (flags and a scratch register only) before an
 *   emulated conditional jump: the probe can move to the jump.
 * hipEventSynchronize: test, then a write of an argument register (rsi): it cannot.
 * hipDeviceSynchronize: sub from rsp first: it cannot.
 * hipEventQuery: test before the jump, but a loop branches back to the jump: it cannot. */
        .text
        .globl  hipStreamSynchronize
        .type   hipStreamSynchronize, @function
hipStreamSynchronize:
        test    %rdi, %rdi
        mov     %rdi, %rax
        je      1f
        mov     $400, %eax
        ret
1:      xor     %eax, %eax
        ret
        .size   hipStreamSynchronize, .-hipStreamSynchronize

        .globl  hipEventSynchronize
        .type   hipEventSynchronize, @function
hipEventSynchronize:
        test    %rdi, %rdi
        mov     %rdi, %rsi
        je      1f
        mov     $400, %eax
        ret
1:      xor     %eax, %eax
        ret
        .size   hipEventSynchronize, .-hipEventSynchronize

        .globl  hipDeviceSynchronize
        .type   hipDeviceSynchronize, @function
hipDeviceSynchronize:
        sub     $8, %rsp
        xor     %eax, %eax
        add     $8, %rsp
        ret
        .size   hipDeviceSynchronize, .-hipDeviceSynchronize

        .globl  hipEventQuery
        .type   hipEventQuery, @function
hipEventQuery:
        test    %rdi, %rdi
        mov     $3, %r10d
2:      jne     1f
        xor     %eax, %eax
        ret
1:      dec     %r10d
        test    %r10d, %r10d
        jmp     2b
        .size   hipEventQuery, .-hipEventQuery

        .section .note.GNU-stack,"",@progbits
