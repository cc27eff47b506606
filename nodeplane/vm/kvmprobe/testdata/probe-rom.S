# The KVM probe guest (package nodeplane/vm/kvmprobe): a 64 KiB firmware
# image QEMU runs as its BIOS (-bios). From the reset vector it does what
# every x86-64 OS does first, writing one byte to the debug console
# (port 0xe9) after each stage:
#   R  real mode
#   P  protected mode (GDT in the ROM, accessed bits preset: the CPU never
#      writes the ROM)
#   T  three timer interrupts: the local APIC's LINT0 in ExtINT mode (as
#      firmware sets it), the PIC remapped to vector 0x20 with only IRQ0
#      unmasked, the PIT at ~1 kHz, sti; hlt
#   L  long mode (identity-mapped 2 MiB pages in RAM at 0x1000-0x3fff)
# then exits QEMU through isa-debug-exit (port 0xf4) with 0x31, which QEMU
# turns into exit status (0x31 << 1) | 1 = 99. Under kvm_pvm (a /dev/kvm
# that runs only PVM guest kernels) it stops after P: the guest never
# gets a timer interrupt, which is why normal kernels hang there.
#
# Assemble (binutils):
#   as --32 -o rom.o probe-rom.S && objcopy -O binary -j .text rom.o rom.bin
# TestROMMatchesSource checks that rom.go holds exactly these bytes.
        .set ROMBASE, 0xf0000     # the last 64 KiB of the BIOS, below 1 MiB
        .code16
        .org 0
start16:
        cli
        mov $'R', %al
        out %al, $0xe9
        lgdtl %cs:(gdtr - start16)
        mov %cr0, %eax
        or $1, %eax               # PE
        mov %eax, %cr0
        ljmpl $0x08, $(ROMBASE + start32 - start16)
        .code32
start32:
        mov $0x10, %ax
        mov %ax, %ds
        mov %ax, %es
        mov %ax, %ss
        mov $0x7000, %esp
        mov $'P', %al
        out %al, $0xe9
        movl $0x700, 0xfee00350   # local APIC LVT LINT0: ExtINT, unmasked
        mov $0x11, %al            # PIC: ICW1
        out %al, $0x20
        mov $0x20, %al            # ICW2: vectors 0x20-0x27
        out %al, $0x21
        mov $0x04, %al            # ICW3
        out %al, $0x21
        mov $0x01, %al            # ICW4: 8086 mode
        out %al, $0x21
        mov $0xfe, %al            # mask all but IRQ0
        out %al, $0x21
        mov $0x34, %al            # PIT channel 0, mode 2
        out %al, $0x43
        mov $0xa9, %al            # divisor 0x04a9: ~1 kHz
        out %al, $0x40
        mov $0x04, %al
        out %al, $0x40
        lidt (ROMBASE + idtr - start16)
        xor %ebx, %ebx
        sti
1:      hlt
        cmp $3, %ebx
        jb 1b
        cli
        mov $'T', %al
        out %al, $0xe9
        mov $0x1000, %edi         # page tables: PML4 0x1000, PDPT 0x2000, PD 0x3000
        mov $0x3000, %ecx
        xor %eax, %eax
        rep stosb
        movl $0x2003, 0x1000
        movl $0x3003, 0x2000
        mov $0x3000, %edi
        mov $0x83, %eax           # present, writable, 2 MiB
        mov $512, %ecx
2:      mov %eax, (%edi)
        movl $0, 4(%edi)
        add $0x200000, %eax
        add $8, %edi
        loop 2b
        mov %cr4, %eax
        or $0x20, %eax            # PAE
        mov %eax, %cr4
        mov $0x1000, %eax
        mov %eax, %cr3
        mov $0xc0000080, %ecx     # EFER.LME
        rdmsr
        or $0x100, %eax
        wrmsr
        mov %cr0, %eax
        or $0x80000000, %eax      # PG
        mov %eax, %cr0
        ljmp $0x18, $(ROMBASE + start64 - start16)
irq0:
        inc %ebx
        push %eax
        mov $0x20, %al            # EOI
        out %al, $0x20
        pop %eax
        iret
        .code64
start64:
        mov $'L', %al
        out %al, $0xe9
        mov $0x31, %al
        out %al, $0xf4
3:      hlt
        jmp 3b
        .balign 8
gdt:    # access bytes with the accessed bit set
        .quad 0
        .quad 0x00cf9b000000ffff  # 0x08 code, 32-bit
        .quad 0x00cf93000000ffff  # 0x10 data
        .quad 0x00af9b000000ffff  # 0x18 code, 64-bit
gdtr:
        .word gdtr - gdt - 1
        .long ROMBASE + gdt - start16
        .balign 8
idt:    # vectors 0-0x1f absent; 0x20: interrupt gate to irq0
        .fill 0x20, 8, 0
        .word (ROMBASE + irq0 - start16) & 0xffff
        .word 0x08
        .byte 0, 0x8e
        .word (ROMBASE + irq0 - start16) >> 16
idtr:
        .word idtr - idt - 1
        .long ROMBASE + idt - start16
        .code16
        .org 0xfff0
reset:
        ljmp $0xf000, $start16
        .org 0x10000
