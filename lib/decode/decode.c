/* STUB (helper: decode). Capstone-based decoder. */
#include "decode.h"

lomas_status decoder_new(decoder **out)
{
	(void)out;
	return error_set(LOMAS_ENOTSUP, "decoder not built yet");
}

void decoder_free(decoder *d)
{
	(void)d;
}

lomas_status decode_bytes(decoder *d, const uint8_t *code, size_t len, uint64_t pc,
			  const struct user_regs_struct *regs, decode_insn *out)
{
	(void)d; (void)code; (void)len; (void)pc; (void)regs; (void)out;
	return error_set(LOMAS_ENOTSUP, "decoder not built yet");
}

lomas_status decoder_at(decoder *d, pid_t pid, const struct user_regs_struct *regs,
			decode_insn *out)
{
	(void)d; (void)pid; (void)regs; (void)out;
	return error_set(LOMAS_ENOTSUP, "decoder not built yet");
}

void decoder_invalidate(decoder *d, uint64_t start, uint64_t end)
{
	(void)d; (void)start; (void)end;
}
