/*
 * The tool's instrumentation: what Valgrind's generated code does at each
 * data reference of the program (docs/architecture.md, as the lackey reader counts
 * them: each VEX load or store is one reference; a compare-and-swap, or a
 * helper that reads and writes memory, is a load then a store of the same
 * address; a guarded load or store counts when its guard holds).
 *
 * The references of a superblock fall into runs, cut at its side exits
 * (Ist_Exit). A run of k references charges the countdown once, at its
 * first reference (a load, a subtract, a store, a compare), and each
 * reference then tests its filter byte: the helper is called (a guarded
 * dirty call) only when the byte is set or the run holds a due sample. A
 * guarded reference is a run of its own whose charge is its guard (0 or 1).
 * The lackey tool instead calls a helper for every reference; that is this
 * tool's --lomas-fastpath=helper, kept to measure what the IR buys.
 *
 * A reference that faults ends its superblock: the rest of its run was
 * charged and did not happen (the clock runs ahead by fewer references than
 * the run holds; the pass plugin of the inline clock does the same).
 */
#include "pub_tool_libcassert.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"

#include "tool.h"

/* Set by tool_main.c (--lomas-fastpath=helper): a helper call per reference. */
Bool lt_helper_per_ref = False;

/* One reference of the superblock being instrumented. */
typedef struct ref_ev {
	Int stmt;      /* the statement making it (its checks go before it) */
	IRExpr *addr;  /* :: Ity_I64 */
	IRExpr *guard; /* :: Ity_I1, or NULL (unconditional) */
	UInt size;
	Bool store;
	Addr pc;
	UInt ilen;
	Bool modify;    /* a load then a store of the same address by one instruction */
	UInt run_first; /* index of its run's first event */
	UInt run_refs;  /* references in its run */
	UInt after;     /* references of its run after its own */
} ref_ev;

typedef struct ev_list {
	ref_ev *ev;
	UInt n, cap;
	Addr pc;
	UInt ilen;
} ev_list;

static void ev_add(ev_list *l, Int stmt, IRExpr *addr, IRExpr *guard, UInt size, Bool store)
{
	ref_ev *e;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->ev = VG_(realloc)("lomas.instrument.ev", l->ev, l->cap * sizeof *l->ev);
	}
	e = &l->ev[l->n++];
	e->stmt = stmt;
	e->addr = addr;
	e->guard = guard;
	e->modify = False;
	e->size = size;
	e->store = store;
	e->pc = l->pc;
	e->ilen = l->ilen;
}

/* Every reference of sb, in the order of its statements (and the load of a
 * read-modify-write before its store). */
static void collect_refs(IRSB *sb, Int first, ev_list *l)
{
	IRTypeEnv *tyenv = sb->tyenv;
	for (Int i = first; i < sb->stmts_used; i++) {
		IRStmt *st = sb->stmts[i];
		if (!st)
			continue;
		switch (st->tag) {
		case Ist_IMark:
			l->pc = (Addr)st->Ist.IMark.addr;
			l->ilen = st->Ist.IMark.len;
			break;
		case Ist_WrTmp:
			if (st->Ist.WrTmp.data->tag == Iex_Load) {
				IRExpr *ld = st->Ist.WrTmp.data;
				ev_add(l, i, ld->Iex.Load.addr, NULL, sizeofIRType(ld->Iex.Load.ty),
				       False);
			}
			break;
		case Ist_Store:
			ev_add(l, i, st->Ist.Store.addr, NULL,
			       sizeofIRType(typeOfIRExpr(tyenv, st->Ist.Store.data)), True);
			break;
		case Ist_StoreG: {
			IRStoreG *sg = st->Ist.StoreG.details;
			ev_add(l, i, sg->addr, sg->guard,
			       sizeofIRType(typeOfIRExpr(tyenv, sg->data)), True);
			break;
		}
		case Ist_LoadG: {
			IRLoadG *lg = st->Ist.LoadG.details;
			IRType ty = Ity_INVALID, wide = Ity_INVALID;
			typeOfIRLoadGOp(lg->cvt, &wide, &ty);
			ev_add(l, i, lg->addr, lg->guard, sizeofIRType(ty), False);
			break;
		}
		case Ist_CAS: {
			IRCAS *cas = st->Ist.CAS.details;
			UInt size = sizeofIRType(typeOfIRExpr(tyenv, cas->dataLo));
			if (cas->dataHi)
				size *= 2; /* a double-word CAS */
			ev_add(l, i, cas->addr, NULL, size, False);
			ev_add(l, i, cas->addr, NULL, size, True);
			break;
		}
		case Ist_LLSC:
			if (!st->Ist.LLSC.storedata)
				ev_add(l, i, st->Ist.LLSC.addr, NULL,
				       sizeofIRType(typeOfIRTemp(tyenv, st->Ist.LLSC.result)),
				       False);
			else
				ev_add(l, i, st->Ist.LLSC.addr, NULL,
				       sizeofIRType(typeOfIRExpr(tyenv, st->Ist.LLSC.storedata)),
				       True);
			break;
		case Ist_Dirty: {
			/* A helper of the guest's (fxsave, xsave...) that touches memory:
			 * one reference of mSize bytes per direction; its guard is not
			 * looked at (lackey does not either). */
			IRDirty *d = st->Ist.Dirty.details;
			if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
				ev_add(l, i, d->mAddr, NULL, (UInt)d->mSize, False);
			if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify)
				ev_add(l, i, d->mAddr, NULL, (UInt)d->mSize, True);
			break;
		}
		case Ist_Exit: {
			/* A side exit ends the run: mark it with a sentinel. */
			ev_add(l, i, NULL, NULL, 0, False);
			break;
		}
		default: break;
		}
	}
}

/*
 * A load followed at once by a store of the same size to the same address
 * by the same instruction (a read-modify-write: add to memory, a CAS, a
 * helper that modifies memory) becomes one event of two references, as
 * lackey merges them into one "M": one filter test for both (nothing runs
 * between them, so the store's byte is the load's unless the load's own
 * visit set it, and then the helper handles the store in the same call).
 */
static void merge_modifies(ev_list *l)
{
	UInt out = 0;
	for (UInt i = 0; i < l->n; i++) {
		ref_ev *e = &l->ev[i], *f = i + 1 < l->n ? &l->ev[i + 1] : NULL;
		if (f && e->addr && f->addr && !e->store && f->store && !e->guard && !f->guard &&
		    e->size == f->size && e->pc == f->pc && eqIRAtom(e->addr, f->addr)) {
			l->ev[out] = *e;
			l->ev[out++].modify = True;
			i++;
			continue;
		}
		l->ev[out++] = *e;
	}
	l->n = out;
}

/* Cut the references into runs (at side exits; a guarded one alone), drop
 * the exit sentinels and give each event its place in its run. */
static void cut_runs(ev_list *l)
{
	UInt out = 0, start = 0;
	for (UInt i = 0; i <= l->n; i++) {
		Bool end = i == l->n || !l->ev[i].addr || l->ev[i].guard;
		if (end) {
			/* Close the run [start, out) of unguarded references. */
			UInt refs = 0, left;
			for (UInt j = start; j < out; j++)
				refs += l->ev[j].modify ? 2 : 1;
			left = refs;
			for (UInt j = start; j < out; j++) {
				left -= l->ev[j].modify ? 2 : 1;
				l->ev[j].run_first = start;
				l->ev[j].run_refs = refs;
				l->ev[j].after = left;
			}
			if (i < l->n && l->ev[i].addr) {
				/* A guarded reference: a run of its own. */
				l->ev[out] = l->ev[i];
				l->ev[out].run_first = out;
				l->ev[out].run_refs = 1;
				l->ev[out].after = 0;
				out++;
			}
			start = out;
			continue;
		}
		l->ev[out++] = l->ev[i];
	}
	l->n = out;
}

static IRExpr *u64(ULong v)
{
	return IRExpr_Const(IRConst_U64(v));
}

static IRExpr *u8(UChar v)
{
	return IRExpr_Const(IRConst_U8(v));
}

/* The output must stay flat IR: every operand an atom (a temp or a constant). */
static IRTemp assign(IRSB *sb, IRType ty, IRExpr *e)
{
	IRTemp t = newIRTemp(sb->tyenv, ty);
	addStmtToIRSB(sb, IRStmt_WrTmp(t, e));
	return t;
}

static IRExpr *atom(IRSB *sb, IRType ty, IRExpr *e)
{
	return IRExpr_RdTmp(assign(sb, ty, e));
}

/*
 * Charge the countdown for a run: by its length, or for a guarded reference
 * by its guard (0 or 1). Returns the run's due flag (:: Ity_I8, 1 when the
 * countdown reached zero or below: a sample is due in the run).
 */
static IRTemp charge(IRSB *sb, const ref_ev *e)
{
	IRTemp cd = assign(sb, Ity_I64, IRExpr_Get(lt_cd_offset, Ity_I64));
	IRExpr *k =
	    e->guard ? atom(sb, Ity_I64, IRExpr_Unop(Iop_1Uto64, e->guard)) : u64(e->run_refs);
	IRTemp left = assign(sb, Ity_I64, IRExpr_Binop(Iop_Sub64, IRExpr_RdTmp(cd), k));
	addStmtToIRSB(sb, IRStmt_Put(lt_cd_offset, IRExpr_RdTmp(left)));
	IRTemp due = assign(sb, Ity_I1, IRExpr_Binop(Iop_CmpLE64S, IRExpr_RdTmp(left), u64(0)));
	return assign(sb, Ity_I8, IRExpr_Unop(Iop_1Uto8, IRExpr_RdTmp(due)));
}

/* ------------------------------------------------------- descriptors */

/*
 * Each reference's constants (pc, size, kind, place in its run) are a
 * descriptor; the generated code passes its index, one constant instead of
 * two. A table of (pc, info) -> index keeps a reference translated again
 * (a discarded translation, another superblock through the same code) at
 * one descriptor.
 */
ref_desc *lt_descs;
static UInt ndescs, descs_cap;
static UInt *desc_hash; /* index + 1, or 0: empty */
static UInt hash_cap;   /* power of two */

static UInt hash_of(Addr pc, ULong info)
{
	ULong h = (pc ^ (info * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return (UInt)(h >> 32);
}

static void hash_put(UInt idx)
{
	UInt i = hash_of(lt_descs[idx].pc, lt_descs[idx].info) & (hash_cap - 1);
	while (desc_hash[i])
		i = (i + 1) & (hash_cap - 1);
	desc_hash[i] = idx + 1;
}

static ULong descriptor(Addr pc, ULong info)
{
	UInt i;
	if (2 * (ndescs + 1) > hash_cap) {
		hash_cap = hash_cap ? 2 * hash_cap : 4096;
		VG_(free)(desc_hash);
		desc_hash = VG_(calloc)("lomas.descs.hash", hash_cap, sizeof *desc_hash);
		for (UInt j = 0; j < ndescs; j++)
			hash_put(j);
	}
	for (i = hash_of(pc, info) & (hash_cap - 1); desc_hash[i]; i = (i + 1) & (hash_cap - 1)) {
		const ref_desc *d = &lt_descs[desc_hash[i] - 1];
		if (d->pc == pc && d->info == info)
			return desc_hash[i] - 1;
	}
	if (ndescs == descs_cap) {
		descs_cap = descs_cap ? 2 * descs_cap : 4096;
		lt_descs = VG_(realloc)("lomas.descs", lt_descs, descs_cap * sizeof *lt_descs);
	}
	lt_descs[ndescs].pc = pc;
	lt_descs[ndescs].info = info;
	desc_hash[i] = ndescs + 1;
	return ndescs++;
}

/* The call of the helper for e, guarded by g (NULL: always). It reads and
 * writes the countdown in the guest state, which the call declares, so
 * Valgrind's optimizer writes it back before the call and reads it again
 * after. */
static void call_helper(IRSB *sb, const ref_ev *e, ULong after, IRExpr *g, Bool per_ref)
{
	ULong info = (e->size > INFO_SIZE_MASK ? INFO_SIZE_MASK : e->size) |
	             (e->store ? INFO_STORE : 0) | (e->modify ? INFO_MODIFY : 0) |
	             ((ULong)(e->ilen & 0xf) << INFO_ILEN_SHIFT) | (after << INFO_AFTER_SHIFT);
	void *fn = per_ref ? (void *)lt_count : (void *)lt_visit;
	IRDirty *di =
	    unsafeIRDirty_0_N(3, per_ref ? "lt_count" : "lt_visit", VG_(fnptr_to_fnentry)(fn),
	                      mkIRExprVec_3(IRExpr_GSPTR(), e->addr, u64(descriptor(e->pc, info))));
	if (g)
		di->guard = g;
	di->nFxState = 1;
	di->fxState[0].fx = Ifx_Modify;
	di->fxState[0].offset = (UShort)lt_cd_offset;
	di->fxState[0].size = 8;
	di->fxState[0].nRepeats = 0;
	di->fxState[0].repeatLen = 0;
	addStmtToIRSB(sb, IRStmt_Dirty(di));
}

/* The check of event e, the run's due flag due8. */
static void check(IRSB *sb, const ref_ev *e, IRTemp due8)
{
	ULong after = e->after;
	IRTemp idx, byte, any;
	IRExpr *g;
	if (lt_helper_per_ref) {
		call_helper(sb, e, 0, e->guard, True);
		return;
	}
	if (lt_tracing) {
		/* Every reference visits (a guarded one when its guard holds). */
		call_helper(sb, e, after, e->guard, False);
		return;
	}
	/* filter[(addr >> FILTER_SHIFT) & FILTER_MASK] | due != 0 */
	idx = assign(
	    sb, Ity_I64,
	    IRExpr_Binop(Iop_And64,
	                 atom(sb, Ity_I64, IRExpr_Binop(Iop_Shr64, e->addr, u8(FILTER_SHIFT))),
	                 u64(FILTER_MASK)));
	byte = assign(sb, Ity_I8,
	              IRExpr_Load(Iend_LE, Ity_I8,
	                          atom(sb, Ity_I64,
	                               IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(idx),
	                                            u64((ULong)(Addr)lt_filter)))));
	any = assign(sb, Ity_I8, IRExpr_Binop(Iop_Or8, IRExpr_RdTmp(byte), IRExpr_RdTmp(due8)));
	if (e->guard) {
		/* ... and the guard holds: the byte ANDed with 0xff or 0 (not 1:
		 * a filter byte is a tag whose low bit may be clear). */
		IRTemp both =
		    assign(sb, Ity_I8,
		           IRExpr_Binop(Iop_And8, IRExpr_RdTmp(any),
		                        atom(sb, Ity_I8, IRExpr_Unop(Iop_1Sto8, e->guard))));
		g = IRExpr_Binop(Iop_CmpNE8, IRExpr_RdTmp(both), u8(0));
	} else {
		g = IRExpr_Binop(Iop_CmpNE8, IRExpr_RdTmp(any), u8(0));
	}
	call_helper(sb, e, after, IRExpr_RdTmp(assign(sb, Ity_I1, g)), False);
}

IRSB *lt_instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
                    const VexGuestExtents *vge, const VexArchInfo *archinfo_host, IRType gWordTy,
                    IRType hWordTy)
{
	IRSB *out;
	ev_list l = {0};
	Int i = 0;
	UInt next = 0;
	IRTemp due8 = IRTemp_INVALID;
	(void)closure, (void)vge, (void)archinfo_host;
	if (gWordTy != Ity_I64 || hWordTy != Ity_I64)
		VG_(tool_panic)("lomas: only 64-bit guests and hosts are supported");
	/* The countdown: the first word of the first shadow area (as Memcheck
	 * lays it out: shadow1 follows the guest state, total_sizeB on). */
	tl_assert(lt_cd_offset == layout->total_sizeB);
	out = deepCopyIRSBExceptStmts(in);
	/* The preamble before the first instruction mark, as it is. */
	while (i < in->stmts_used && in->stmts[i]->tag != Ist_IMark)
		addStmtToIRSB(out, in->stmts[i++]);
	collect_refs(in, i, &l);
	/* (A helper call per reference stays one call per reference.) */
	if (!lt_helper_per_ref)
		merge_modifies(&l);
	cut_runs(&l);
	for (; i < in->stmts_used; i++) {
		IRStmt *st = in->stmts[i];
		if (!st || st->tag == Ist_NoOp)
			continue;
		while (next < l.n && l.ev[next].stmt == i) {
			const ref_ev *e = &l.ev[next];
			if (e->run_first == next && !lt_helper_per_ref)
				due8 = charge(out, e);
			check(out, e, due8);
			next++;
		}
		addStmtToIRSB(out, st);
	}
	tl_assert(next == l.n);
	VG_(free)(l.ev);
	return out;
}
