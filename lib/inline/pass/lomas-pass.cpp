// Over ~600 lines: one plugin, one Instrumenter whose run, group, loop-count and
// versioning steps share its per-function state; split, that state would be public.
//
// lomas-pass: the inline clock's compiler pass (an LLVM 16 pass plugin).
//
//   clang-16 -O2 -fpass-plugin=lomas-pass.so prog.c ...
//
// instruments every load and store that is left after optimization (the pass
// runs last, after vectorization) with the inline clock's fast path, in IR,
// so no hook call and no LTO are needed:
//
// * The per-thread countdown (lomas__fast.countdown, initial-exec TLS) is
//   charged once per run of references: the references of a basic block that
//   no call separates. A run of k references subtracts k when it starts; the
//   run is "armed" when that brings the countdown to zero or below, i.e. when
//   one of its references is due for a slow-path visit.
// * Each reference tests one filter byte (lomas__filter[(addr >> 6) & 0xffff],
//   initial-exec TLS) for its 64-byte block. When the byte is non-zero or its
//   run is armed it leaves the fast path, and visits the slow path
//   (lomas__slow_pm, in the preserve_most convention) if the reference is
//   due for one (see "after" below) or the byte may stand for the
//   reference's own line (its tag, or "any"; see lib/inline/inline.h).
//
// The slow path is told, with each visit, how many references of the run
// come after this one ("after", bits 16.. of info): countdown + after is then
// the countdown exactly as a per-reference decrement would have left it, so
// the clock stays exact (see lib/inline/inline.h). Calls end runs, so a
// callee's references are never charged inside its caller's run; only a
// signal handler that interrupts a run sees the clock ahead by the rest of
// the run (fewer than MaxRun references).
//
// An innermost loop without calls keeps the countdown in a register instead
// of thread-local memory (see LoopCount): a loop-carried chain through memory
// (load, subtract, store, each iteration) was the critical path of short
// vector loops.
//
// An innermost loop of one block without calls, whose references all walk
// affine address ranges known at its entry, also gets an uninstrumented copy
// (see version()): it runs instead when, at the loop's entry, the countdown
// outlasts all the loop's references and no filter byte over those ranges is
// set, so that no reference of the loop could leave the fast path. It
// charges the countdown once for the whole loop.
//
// The same references as clang's -fsanitize-coverage=trace-loads,trace-stores
// are instrumented (loads and stores of 1 to 16 bytes in address space 0),
// and the 32- and 64-byte vector accesses of -mavx2 or -march=native builds
// (one reference each; sanitizer coverage drops them, and an AVX build's
// vector loops then counted nothing), plus atomic read-modify-writes and
// compare-exchanges (as stores).

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/LICM.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

#include "../contract.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

using namespace llvm;

namespace
{

// What the runtime expects of the code we write: lib/inline/contract.h,
// which the runtime includes too.
constexpr unsigned FilterShift = LOMAS_ABI_FILTER_SHIFT;
constexpr unsigned FilterBits = LOMAS_ABI_FILTER_BITS;
constexpr uint64_t FilterSize = LOMAS_ABI_FILTER_SIZE;
constexpr uint64_t FilterAny = LOMAS_ABI_FILTER_ANY;
constexpr uint64_t FilterPad = LOMAS_ABI_FILTER_PAD;
constexpr uint64_t RefStoreBit = LOMAS_ABI_REF_STORE;
constexpr uint64_t RefNextKnownBit = LOMAS_ABI_REF_NEXT_KNOWN;
constexpr unsigned AfterShift = LOMAS_ABI_REF_AFTER_SHIFT;
constexpr unsigned NextShift = LOMAS_ABI_REF_NEXT_SHIFT;
// The countdown is lomas__fast's first 8 bytes: the pass declares the
// global as an i64 and loads and stores it at its address.
static_assert(LOMAS_ABI_FAST_COUNTDOWN == 0, "the pass addresses the countdown as lomas__fast");
// Longest run charged at once: bounds the clock's lead inside a signal
// handler and keeps "after" small.
constexpr size_t MaxRun = 256;
// Versioned loops: the largest stride (bytes) of a reference, and the most
// iterations, for which a loop gets an uninstrumented copy (see version()).
constexpr int64_t MaxVersionStride = 256;
constexpr uint64_t MaxVersionTrips = uint64_t(1) << 32;

struct Ref {
	Instruction *I;
	Value *Addr;
	uint64_t Size;
	bool Store;
	// Grouping within a run (see Instrumenter::group): the leader's index
	// (itself for a leader or a reference alone), and for a leader the span of
	// its members' addresses relative to its own, [Lo, Hi], Hi - Lo < 64.
	size_t Leader = 0;
	int64_t Lo = 0, Hi = 0;
	bool HasMembers = false;
	// The run's next reference is at this one's address plus NextOff (the
	// store of a read-modify-write after its load: 0; the next field of a
	// structure): when that is in this one's line (the runtime knows the line
	// size), it is this one's reuse, at distance 0.
	bool NextKnown = false;
	int64_t NextOff = 0;
};

// The reference I makes, if it is one we count.
bool refOf(const DataLayout &DL, Instruction &I, Ref &R)
{
	Value *Ptr = nullptr;
	Type *Ty = nullptr;
	bool Store = false;
	if (auto *L = dyn_cast<LoadInst>(&I)) {
		Ptr = L->getPointerOperand();
		Ty = L->getType();
	} else if (auto *S = dyn_cast<StoreInst>(&I)) {
		Ptr = S->getPointerOperand();
		Ty = S->getValueOperand()->getType();
		Store = true;
	} else if (auto *A = dyn_cast<AtomicRMWInst>(&I)) {
		Ptr = A->getPointerOperand();
		Ty = A->getValOperand()->getType();
		Store = true;
	} else if (auto *X = dyn_cast<AtomicCmpXchgInst>(&I)) {
		Ptr = X->getPointerOperand();
		Ty = X->getNewValOperand()->getType();
		Store = true;
	} else {
		return false;
	}
	if (Ptr->getType()->getPointerAddressSpace() != 0 || Ptr->isSwiftError())
		return false;
	TypeSize Bits = DL.getTypeStoreSizeInBits(Ty);
	if (Bits.isScalable())
		return false;
	uint64_t Bytes = Bits.getFixedValue() / 8;
	if (Bytes != 1 && Bytes != 2 && Bytes != 4 && Bytes != 8 && Bytes != 16 && Bytes != 32 &&
	    Bytes != 64)
		return false;
	R = {&I, Ptr, Bytes, Store};
	return true;
}

// Does I end a run (may it run instrumented code)? Intrinsics never call
// back into the program; anything else that calls might.
bool endsRun(const Instruction &I)
{
	const auto *C = dyn_cast<CallBase>(&I);
	if (!C)
		return false;
	if (isa<IntrinsicInst>(C))
		return false;
	return true;
}

bool skipFunction(const Function &F)
{
	if (F.isDeclaration() || F.hasFnAttribute(Attribute::Naked) ||
	    F.hasFnAttribute(Attribute::DisableSanitizerInstrumentation))
		return true;
	StringRef N = F.getName();
	// The runtime's own entry points, should a program define them.
	return N.startswith("lomas__") || N.startswith("__sanitizer_cov_");
}

class Instrumenter
{
      public:
	explicit Instrumenter(Module &M) : M(M), C(M.getContext()), DL(M.getDataLayout())
	{
		I8 = Type::getInt8Ty(C);
		I16 = Type::getInt16Ty(C);
		I64 = Type::getInt64Ty(C);
		Ptr = PointerType::getUnqual(C);
		Fast = tlsGlobal(LOMAS_ABI_FAST, I64);
		Filter = tlsGlobal(LOMAS_ABI_FILTER, ArrayType::get(I8, FilterSize + FilterPad));
		AttributeList Attrs = AttributeList().addFnAttribute(C, Attribute::NoUnwind);
		Attrs = Attrs.addFnAttribute(C, Attribute::Cold);
		// preserve_most: the call clobbers only r11 (and the vector
		// registers), so values live across it stay in registers.
		Slow =
		    M.getOrInsertFunction(LOMAS_ABI_SLOW_PM, Attrs, Type::getVoidTy(C), Ptr, I64);
		RangeClean = M.getOrInsertFunction(
		    LOMAS_ABI_RANGE_CLEAN, AttributeList().addFnAttribute(C, Attribute::NoUnwind),
		    Type::getInt32Ty(C), I64, I64);
		if (auto *SF = dyn_cast<Function>(Slow.getCallee())) {
			SF->setCallingConv(CallingConv::PreserveMost);
			// In a shared object (the program dlopens it; the runtime is
			// the program's), bound at load time, never through a lazy
			// PLT entry: glibc's lazy resolver (_dl_runtime_resolve) saves
			// only the argument registers, and _dl_fixup may clobber r10,
			// which callers of a preserve_most function keep live across
			// the call. So it is called through the GOT there. A program
			// (PIE or not) defines it: a direct call, as before.
			if (M.getPICLevel() != PICLevel::NotPIC &&
			    M.getPIELevel() == PIELevel::Default)
				SF->addFnAttr(Attribute::NonLazyBind);
		}
		Unlikely = MDBuilder(C).createBranchWeights(1, 1u << 20);
	}

	bool run(Function &F, ScalarEvolution &SE, LoopInfo &LI, DominatorTree &DT)
	{
		if (skipFunction(F))
			return false;
		std::vector<std::vector<Ref>> Runs;
		std::vector<LoopCount *> RunLoop;
		bool Simplified = false;
		std::map<const BasicBlock *, Loop *> Promotable =
		    promotableLoops(LI, DT, SE, Simplified);
		std::map<Loop *, LoopCount> Counts;
		// Clean copies and their entry checks: not instrumented.
		std::set<const BasicBlock *> Skip;
		std::set<Loop *> Seen;
		for (auto &KV : Promotable)
			if (Seen.insert(KV.second).second)
				version(F, KV.second, SE, LI, DT, Skip);
		for (BasicBlock &BB : F) {
			std::vector<Ref> Cur;
			if (Skip.count(&BB))
				continue;
			for (Instruction &I : BB) {
				Ref R;
				if (endsRun(I) || Cur.size() == MaxRun) {
					if (!Cur.empty())
						Runs.push_back(std::move(Cur));
					Cur.clear();
				}
				if (refOf(DL, I, R))
					Cur.push_back(R);
			}
			if (!Cur.empty())
				Runs.push_back(std::move(Cur));
		}
		for (auto &Run : Runs) {
			group(Run, SE);
			auto It = Promotable.find(Run.front().I->getParent());
			LoopCount *LC = nullptr;
			if (It != Promotable.end()) {
				LC = &Counts[It->second];
				if (!LC->Rem)
					promote(F, It->second, *LC);
			}
			RunLoop.push_back(LC);
		}
		for (size_t I = 0; I < Runs.size(); I++)
			instrument(Runs[I], RunLoop[I]);
		if (!Counts.empty()) {
			std::vector<AllocaInst *> Slots;
			for (auto &KV : Counts)
				Slots.push_back(KV.second.Rem), Slots.push_back(KV.second.Cd0);
			DominatorTree DT(F);
			PromoteMemToReg(Slots, DT);
		}
		return !Runs.empty() || Simplified || !Skip.empty();
	}

      private:
	// An innermost loop without calls keeps the countdown in a register
	// (Rem), so no run of the loop loads or stores the TLS countdown. What
	// the loop charged since it last synchronised, Cd0 - Rem (Cd0: the TLS
	// countdown then), is subtracted from the TLS countdown before each
	// slow-path call (which reads and may reset it; both are then read again
	// from it) and on every exit. The clock and the samples are those of
	// per-run updates; only a signal handler that interrupts the loop sees
	// the thread's clock behind by the loop's references since it last
	// synchronised (fewer than one gap). Rem and Cd0 are allocas until
	// PromoteMemToReg makes them SSA values; Cd0 is used off the fast path
	// only.
	struct LoopCount {
		AllocaInst *Rem = nullptr, *Cd0 = nullptr;
	};

	// The blocks of the loops whose countdown can live in registers: the
	// innermost loops without calls, given a preheader and exit blocks of
	// their own (LoopSimplify) where they lack them.
	std::map<const BasicBlock *, Loop *> promotableLoops(LoopInfo &LI, DominatorTree &DT,
	                                                     ScalarEvolution &SE, bool &Simplified)
	{
		std::map<const BasicBlock *, Loop *> Blocks;
		for (Loop *L : LI.getLoopsInPreorder()) {
			SmallVector<BasicBlock *, 4> Exits;
			bool Ok = L->isInnermost();
			for (BasicBlock *BB : L->blocks())
				for (Instruction &I : *BB)
					Ok &= !endsRun(I);
			if (!Ok)
				continue;
			if (!L->getLoopPreheader() || !L->hasDedicatedExits())
				Simplified |=
				    simplifyLoop(L, &DT, &LI, &SE, nullptr, nullptr, false);
			if (!L->getLoopPreheader() || !L->hasDedicatedExits())
				continue;
			L->getUniqueExitBlocks(Exits);
			for (BasicBlock *E : Exits)
				Ok &= !E->isEHPad() && E->getFirstInsertionPt() != E->end();
			if (!Ok)
				continue;
			for (BasicBlock *BB : L->blocks())
				Blocks[BB] = L;
		}
		return Blocks;
	}

	// An address range a versioned loop's references walk: Base (the address
	// scalar evolution gives one of them, affine in the loop or invariant)
	// plus [Lo, Hi) bytes, over all iterations.
	struct Range {
		const SCEV *Base;
		int64_t Step;
		int64_t Lo, Hi;
	};

	// The ranges of L's references (one block), or false if some reference's
	// address is not affine with a constant step of at most MaxVersionStride
	// bytes, or cannot be computed at L's entry.
	bool loopRanges(Loop *L, BasicBlock *BB, ScalarEvolution &SE, SCEVExpander &Exp,
	                Instruction *At, std::vector<Range> &Out, uint64_t &K)
	{
		K = 0;
		for (Instruction &I : *BB) {
			Ref R;
			if (!refOf(DL, I, R))
				continue;
			K++;
			if (!SE.isSCEVable(R.Addr->getType()))
				return false;
			const SCEV *S = SE.getSCEV(R.Addr);
			int64_t Step = 0;
			if (const auto *AR = dyn_cast<SCEVAddRecExpr>(S)) {
				if (AR->getLoop() != L || !AR->isAffine())
					return false;
				const auto *St = dyn_cast<SCEVConstant>(AR->getStepRecurrence(SE));
				if (!St || St->getAPInt().getSignificantBits() > 32)
					return false;
				Step = St->getAPInt().getSExtValue();
				if (Step > MaxVersionStride || Step < -MaxVersionStride)
					return false;
				if (!Exp.isSafeToExpandAt(AR->getStart(), At))
					return false;
			} else if (!SE.isLoopInvariant(S, L) || !Exp.isSafeToExpandAt(S, At)) {
				return false;
			}
			bool Joined = false;
			for (Range &G : Out) {
				if (G.Step != Step)
					continue;
				const auto *D = dyn_cast<SCEVConstant>(SE.getMinusSCEV(S, G.Base));
				if (!D || D->getAPInt().getSignificantBits() > 16)
					continue;
				int64_t Off = D->getAPInt().getSExtValue();
				G.Lo = std::min(G.Lo, Off);
				G.Hi = std::max(G.Hi, Off + int64_t(R.Size));
				Joined = true;
				break;
			}
			if (!Joined)
				Out.push_back({S, Step, 0, int64_t(R.Size)});
		}
		return K != 0 && K <= MaxRun * 16;
	}

	// Version L, an innermost loop of one block without calls (in
	// LoopSimplify form), if its references' ranges are known at its entry:
	//
	//   P (preheader) -> check: countdown > trips x K, and no filter byte
	//                    set over any range?
	//     yes -> CPre: countdown -= trips x K -> C (a copy of L, left
	//                  uninstrumented) -> E (the exit)
	//     no  -> P2 (L's preheader now) -> L (instrumented as any
	//            loop) -> Ep (L's exit now: the countdown's commit goes
	//            here) -> E
	//
	// Every iteration runs the whole block, so the loop makes exactly
	// trips x K references; with the countdown above that none of them is
	// due, and with no filter byte set none touches a watched line: the
	// instrumented loop would not leave its fast path, and the clean copy
	// gives the same clock and the same samples.
	void version(Function &F, Loop *L, ScalarEvolution &SE, LoopInfo &LI, DominatorTree &DT,
	             std::set<const BasicBlock *> &Skip)
	{
		if (L->getNumBlocks() != 1)
			return;
		BasicBlock *BB = L->getHeader();
		BasicBlock *P = L->getLoopPreheader();
		BasicBlock *E = L->getExitBlock();
		auto *Term = dyn_cast<BranchInst>(BB->getTerminator());
		if (!P || !E || !Term || !Term->isConditional() || L->getLoopLatch() != BB ||
		    E->getSinglePredecessor() != BB || !isa<BranchInst>(P->getTerminator()))
			return;
		const SCEV *BTC = SE.getBackedgeTakenCount(L);
		if (isa<SCEVCouldNotCompute>(BTC) || !BTC->getType()->isIntegerTy() ||
		    BTC->getType()->getIntegerBitWidth() > 64)
			return;
		SCEVExpander Exp(SE, DL, "lomas.v");
		std::vector<Range> Ranges;
		uint64_t K;
		if (!Exp.isSafeToExpandAt(BTC, P->getTerminator()) ||
		    !loopRanges(L, BB, SE, Exp, P->getTerminator(), Ranges, K))
			return;

		// The blocks, before the check is filled in.
		LLVMContext &Ctx = F.getContext();
		BasicBlock *Check = BasicBlock::Create(Ctx, "lomas.v.check", &F, BB);
		BasicBlock *P2 = BasicBlock::Create(Ctx, "lomas.v.ph", &F, BB);
		BasicBlock *CPre = BasicBlock::Create(Ctx, "lomas.v.clean.ph", &F, BB);
		BasicBlock *Ep = BasicBlock::Create(Ctx, "lomas.v.exit", &F, E);
		BranchInst::Create(BB, P2);
		BranchInst::Create(E, Ep);
		P->getTerminator()->replaceSuccessorWith(BB, Check);
		BB->replacePhiUsesWith(P, P2);
		Term->replaceSuccessorWith(E, Ep);
		E->replacePhiUsesWith(BB, Ep);

		// The clean copy: its back edge to itself, its entry from CPre,
		// its exit straight to E.
		ValueToValueMapTy VMap;
		BasicBlock *CBB = CloneBasicBlock(BB, VMap, ".lomas.clean", &F);
		VMap[BB] = CBB;
		VMap[P2] = CPre;
		VMap[Ep] = E;
		SmallVector<BasicBlock *, 1> Cloned{CBB};
		remapInstructionsInBlocks(Cloned, VMap);
		BranchInst::Create(CBB, CPre);
		auto Mapped = [&](Value *V) {
			auto It = VMap.find(V);
			return It == VMap.end() ? V : static_cast<Value *>(It->second);
		};
		for (PHINode &Phi : E->phis())
			Phi.addIncoming(Mapped(Phi.getIncomingValueForBlock(Ep)), CBB);
		// Other uses of the loop's values after it: merge the two copies.
		for (Instruction &I : *BB) {
			PHINode *Merge = nullptr;
			// A snapshot: Merge itself becomes a use of I.
			std::vector<Use *> Uses;
			for (Use &U : I.uses())
				Uses.push_back(&U);
			for (Use *UP : Uses) {
				Use &U = *UP;
				auto *UI = cast<Instruction>(U.getUser());
				if (UI->getParent() == BB || UI->getParent() == CBB)
					continue;
				if (auto *Phi = dyn_cast<PHINode>(UI))
					if (Phi->getParent() == E && Phi->getIncomingBlock(U) == Ep)
						continue;
				if (!Merge) {
					Merge = PHINode::Create(
					    I.getType(), 2, I.getName() + ".lomas", &E->front());
					Merge->addIncoming(&I, Ep);
					Merge->addIncoming(Mapped(&I), CBB);
				}
				U.set(Merge);
			}
		}
		// Loop info: the new blocks are in L's parent, the copy is a loop
		// of its own (scalar evolution expects a loop at every recurrence).
		Loop *Parent = L->getParentLoop();
		if (Parent)
			for (BasicBlock *NB : {Check, P2, CPre, Ep})
				Parent->addBasicBlockToLoop(NB, LI);
		Loop *CL = LI.AllocateLoop();
		if (Parent)
			Parent->addChildLoop(CL);
		else
			LI.addTopLevelLoop(CL);
		CL->addBasicBlockToLoop(CBB, LI);

		// The check: the countdown first (it fails for long loops), then
		// each range's filter bytes: up to 8 blocks with one load, more
		// through lomas__range_clean.
		Instruction *Placeholder = new UnreachableInst(Ctx, Check);
		// The expander asks the tree where it may insert (and reuse) code.
		DT.recalculate(F);
		Value *Trips = Exp.expandCodeFor(BTC, BTC->getType(), Placeholder);
		std::vector<Value *> Starts;
		for (const Range &G : Ranges) {
			const SCEV *Start = G.Base;
			if (const auto *AR = dyn_cast<SCEVAddRecExpr>(G.Base))
				Start = AR->getStart();
			Value *S = Exp.expandCodeFor(Start, Start->getType(), Placeholder);
			Starts.push_back(S);
		}
		IRBuilder<> B(Placeholder);
		Value *BtcV = B.CreateZExt(Trips, I64);
		Value *Total = B.CreateMul(B.CreateAdd(BtcV, ConstantInt::get(I64, 1)),
		                           ConstantInt::get(I64, K));
		Value *Cd = B.CreateLoad(I64, Fast);
		Value *Ok =
		    B.CreateAnd(B.CreateICmpULT(BtcV, ConstantInt::get(I64, MaxVersionTrips)),
		                B.CreateICmpSGT(Cd, Total));
		BasicBlock *Next = BasicBlock::Create(Ctx, "lomas.v.range", &F, P2);
		B.CreateCondBr(Ok, Next, P2);
		Placeholder->eraseFromParent();
		Skip.insert(Check);
		for (size_t J = 0; J < Ranges.size(); J++) {
			const Range &G = Ranges[J];
			BasicBlock *Cur = Next;
			Skip.insert(Cur);
			IRBuilder<> RB(Cur);
			Value *S = Starts[J]->getType()->isPointerTy()
			               ? RB.CreatePtrToInt(Starts[J], I64)
			               : RB.CreateZExtOrTrunc(Starts[J], I64);
			// [first byte, last byte] over all iterations.
			Value *Span = RB.CreateMul(BtcV, ConstantInt::get(I64, G.Step));
			Value *First = RB.CreateAdd(S, ConstantInt::get(I64, G.Lo));
			Value *Last = RB.CreateAdd(S, ConstantInt::get(I64, G.Hi - 1));
			if (G.Step >= 0)
				Last = RB.CreateAdd(Last, Span);
			else
				First = RB.CreateAdd(First, Span);
			Value *Block0 = RB.CreateLShr(First, FilterShift);
			Value *Blocks =
			    RB.CreateAdd(RB.CreateSub(RB.CreateLShr(Last, FilterShift), Block0),
			                 ConstantInt::get(I64, 1));
			Value *Idx = RB.CreateAnd(Block0, FilterSize - 1);
			// One load: bytes Idx .. Idx + Blocks - 1 (the padding past the
			// filter's end reads as zero, and a range that wraps around
			// the filter's end takes the call).
			Value *Small =
			    RB.CreateAnd(RB.CreateICmpULE(Blocks, ConstantInt::get(I64, 8)),
			                 RB.CreateICmpULE(RB.CreateAdd(Idx, Blocks),
			                                  ConstantInt::get(I64, FilterSize)));
			BasicBlock *Inl = BasicBlock::Create(Ctx, "lomas.v.inl", &F, P2);
			BasicBlock *Call = BasicBlock::Create(Ctx, "lomas.v.call", &F, P2);
			Next = J + 1 < Ranges.size()
			           ? BasicBlock::Create(Ctx, "lomas.v.range", &F, P2)
			           : CPre;
			Skip.insert(Inl);
			Skip.insert(Call);
			if (Parent)
				for (BasicBlock *NB : {Cur, Inl, Call})
					Parent->addBasicBlockToLoop(NB, LI);
			RB.CreateCondBr(Small, Inl, Call);
			IRBuilder<> IB(Inl);
			Value *W = IB.CreateAlignedLoad(I64, IB.CreateInBoundsGEP(I8, Filter, Idx),
			                                Align(1));
			// Keep the low Blocks bytes (Blocks in 1..8: a shift of 0..56 bits).
			Value *Shift =
			    IB.CreateShl(IB.CreateSub(ConstantInt::get(I64, 8), Blocks), 3);
			Value *Clean =
			    IB.CreateICmpEQ(IB.CreateShl(W, Shift), ConstantInt::get(I64, 0));
			IB.CreateCondBr(Clean, Next, P2);
			IRBuilder<> CB(Call);
			Value *R = CB.CreateCall(RangeClean, {Block0, Blocks});
			CB.CreateCondBr(CB.CreateICmpNE(R, ConstantInt::get(R->getType(), 0)), Next,
			                P2);
		}
		IRBuilder<> PB(CPre->getTerminator());
		PB.CreateStore(PB.CreateSub(PB.CreateLoad(I64, Fast), Total), Fast);
		Skip.insert(CPre);
		Skip.insert(CBB);
		// Scalar evolution (and the next loop's expander) asks the tree.
		DT.recalculate(F);
		SE.forgetLoop(L);
	}

	// Set up L's registers: taken from the countdown in the preheader, given
	// back to it on each exit (before anything else there, runs included).
	void promote(Function &F, Loop *L, LoopCount &LC)
	{
		BasicBlock &Entry = F.getEntryBlock();
		IRBuilder<> EB(&Entry, Entry.getFirstInsertionPt());
		LC.Rem = EB.CreateAlloca(I64, nullptr, "lomas.rem");
		LC.Cd0 = EB.CreateAlloca(I64, nullptr, "lomas.cd0");
		IRBuilder<> PB(L->getLoopPreheader()->getTerminator());
		reload(PB, LC);
		SmallVector<BasicBlock *, 4> Exits;
		L->getUniqueExitBlocks(Exits);
		for (BasicBlock *E : Exits) {
			IRBuilder<> XB(E, E->getFirstInsertionPt());
			commit(XB, LC);
		}
	}

	// countdown -= Cd0 - Rem
	void commit(IRBuilder<> &B, const LoopCount &LC)
	{
		Value *Charged = B.CreateSub(B.CreateLoad(I64, LC.Cd0), B.CreateLoad(I64, LC.Rem));
		B.CreateStore(B.CreateSub(B.CreateLoad(I64, Fast), Charged), Fast);
	}

	// Where the countdown lives: Rem in a promoted loop, else the TLS one.
	Value *countdown(const LoopCount *LC)
	{
		return LC ? static_cast<Value *>(LC->Rem) : Fast;
	}

	// Cd0 = Rem = countdown
	void reload(IRBuilder<> &B, const LoopCount &LC)
	{
		Value *Cd = B.CreateLoad(I64, Fast);
		B.CreateStore(Cd, LC.Cd0);
		B.CreateStore(Cd, LC.Rem);
	}

	GlobalVariable *tlsGlobal(StringRef Name, Type *Ty)
	{
		if (GlobalVariable *G = M.getNamedGlobal(Name))
			return G;
		return new GlobalVariable(M, Ty, false, GlobalValue::ExternalLinkage, nullptr, Name,
		                          nullptr, GlobalValue::InitialExecTLSModel);
	}

	// References of a run whose addresses differ from an earlier one's by a
	// constant (scalar evolution: the same pointer, unrolled or vector copies of
	// one access) join its group while the group's addresses span less than 64
	// bytes: they then lie in at most two filter blocks, the lowest address's
	// and the next. The leader loads both bytes with one 16-bit load; a member
	// takes the full check only if one of them is set or the slow path was
	// visited since the run began (which may have changed the filter), so on
	// the fast path it costs one compare of two registers.
	void group(std::vector<Ref> &Run, ScalarEvolution &SE)
	{
		std::vector<size_t> Leaders;
		for (size_t J = 0; J + 1 < Run.size(); J++) {
			Value *A = Run[J].Addr, *B = Run[J + 1].Addr;
			if (A == B) {
				Run[J].NextKnown = true;
				continue;
			}
			if (!SE.isSCEVable(A->getType()) || !SE.isSCEVable(B->getType()))
				continue;
			const auto *D =
			    dyn_cast<SCEVConstant>(SE.getMinusSCEV(SE.getSCEV(B), SE.getSCEV(A)));
			if (D && D->getAPInt().getSignificantBits() <= 16) {
				Run[J].NextKnown = true;
				Run[J].NextOff = D->getAPInt().getSExtValue();
			}
		}
		for (size_t J = 0; J < Run.size(); J++) {
			Ref &R = Run[J];
			R.Leader = J;
			if (!SE.isSCEVable(R.Addr->getType()))
				continue;
			const SCEV *S = SE.getSCEV(R.Addr);
			for (size_t L : Leaders) {
				Ref &G = Run[L];
				const auto *D =
				    dyn_cast<SCEVConstant>(SE.getMinusSCEV(S, SE.getSCEV(G.Addr)));
				if (!D || D->getAPInt().getSignificantBits() > 16)
					continue;
				int64_t Off = D->getAPInt().getSExtValue();
				int64_t Lo = std::min(G.Lo, Off), Hi = std::max(G.Hi, Off);
				if (Hi - Lo >= int64_t(1) << FilterShift)
					continue;
				G.Lo = Lo;
				G.Hi = Hi;
				G.HasMembers = true;
				R.Leader = L;
				break;
			}
			if (R.Leader == J)
				Leaders.push_back(J);
		}
	}

	Value *filterByte(IRBuilder<> &B, Value *A, bool Volatile = false)
	{
		Value *Idx = B.CreateAnd(B.CreateLShr(A, FilterShift), FilterSize - 1);
		return B.CreateLoad(I8, B.CreateInBoundsGEP(I8, Filter, Idx), Volatile);
	}

	// Clean (16 bits, compared with a group's two filter bytes) after a
	// diamond at Tail: the old value from Head, New from Other.
	Value *joinClean(BasicBlock *Tail, BasicBlock *Head, Value *Old, BasicBlock *Other,
	                 Value *New)
	{
		PHINode *P = PHINode::Create(I16, 2, "lomas.clean", &Tail->front());
		P->addIncoming(Old, Head);
		P->addIncoming(New, Other);
		return P;
	}

	// The full check of R before At: a filter byte that reaches Bar (1, or 0
	// in an armed run) leaves the fast path, then a visit if R is due or the
	// byte may be R's line. Returns the clean flag after it (0 once the slow
	// path was called).
	// Own: R's filter byte, when the caller has it already (a group leader
	// at its group's lowest address: the low byte of the group's 16-bit
	// load), or null (loaded here, folded into the compare: cmp reg, mem).
	Value *emitFull(const Ref &R, Instruction *At, Value *Bar, Value *Clean, uint64_t After,
	                const LoopCount *LC, Value *Own = nullptr)
	{
		IRBuilder<> IB(At);
		BasicBlock *Head = At->getParent();
		Value *A = IB.CreatePtrToInt(R.Addr, I64);
		Value *Go = IB.CreateICmpUGE(Own ? Own : filterByte(IB, A), Bar);
		Instruction *Then = SplitBlockAndInsertIfThen(Go, At, false, Unlikely);
		BasicBlock *ThenBB = Then->getParent();
		// Off the fast path: visit only if this very reference is due (the
		// countdown as it is now, after any visit earlier in the run, plus
		// the references after it: <= 0), or the byte may stand for its line
		// (its tag, or "any"). An armed run's other references, and a byte
		// whose tag is another line's (an alias 4 MiB away), make no call.
		// The byte is loaded again here, volatile so that it is never merged
		// with the fast path's load: that load then has the compare as its
		// only use and folds into it (cmp reg, mem).
		IRBuilder<> TB(Then);
		Value *Byte = filterByte(TB, A, true);
		Value *Tag = TB.CreateOr(
		    TB.CreateAnd(TB.CreateTrunc(TB.CreateLShr(A, FilterShift + FilterBits), I8),
		                 0x7f),
		    0x80);
		Value *Cd = TB.CreateLoad(I64, countdown(LC));
		Value *Due = TB.CreateICmpSLT(TB.CreateAdd(Cd, ConstantInt::get(I64, After)),
		                              ConstantInt::get(I64, 1));
		Value *Need = TB.CreateOr(
		    TB.CreateOr(Due, TB.CreateICmpEQ(Byte, ConstantInt::get(I8, FilterAny))),
		    TB.CreateICmpEQ(Byte, Tag));
		Instruction *CallAt = SplitBlockAndInsertIfThen(Need, Then, false);
		IRBuilder<> SB(CallAt);
		uint64_t Info = R.Size | (R.Store ? RefStoreBit : 0) | (After << AfterShift);
		if (R.NextKnown)
			Info |= RefNextKnownBit | (uint64_t(uint16_t(R.NextOff)) << NextShift);
		if (LC)
			commit(SB, *LC);
		CallInst *Call = SB.CreateCall(Slow, {R.Addr, ConstantInt::get(I64, Info)});
		Call->setCallingConv(CallingConv::PreserveMost);
		Call->setDebugLoc(R.I->getDebugLoc());
		if (LC)
			reload(SB, *LC);
		Value *C2 = joinClean(Then->getParent(), ThenBB, Clean, CallAt->getParent(),
		                      ConstantInt::get(I16, 0));
		return joinClean(At->getParent(), Head, Clean, Then->getParent(), C2);
	}

	void instrument(const std::vector<Ref> &Run, const LoopCount *LC)
	{
		const uint64_t K = Run.size();
		IRBuilder<> B(Run.front().I);
		// countdown -= k; armed = countdown <= 0 (signed). The countdown is
		// Rem in a promoted loop.
		Value *Cd = countdown(LC);
		LoadInst *Old = B.CreateLoad(I64, Cd, "lomas.cd");
		Value *New = B.CreateSub(Old, ConstantInt::get(I64, K), "lomas.cd.run");
		B.CreateStore(New, Cd);
		// The bar a filter byte must reach to leave the fast path: 1, or 0
		// (every byte) in an armed run. One compare of the byte in memory
		// against it and one branch per reference (two branches per
		// reference, filter then armed, made the unrolled pointer chase of
		// the threads workload ten times slower on AMD Zen).
		Value *Bar =
		    B.CreateZExt(B.CreateICmpSGT(New, ConstantInt::get(I64, 0)), I8, "lomas.bar");
		// Clean: Bar until the run's first slow-path visit, then 0; 16 bits
		// wide, as the groups' two filter bytes it is compared with.
		Value *Clean = B.CreateZExt(Bar, I16);
		std::vector<Value *> GroupBytes(K, nullptr);
		for (uint64_t J = 0; J < K; J++) {
			const Ref &R = Run[J];
			uint64_t After = K - 1 - J;
			if (R.Leader != J) {
				IRBuilder<> IB(R.I);
				BasicBlock *Head = R.I->getParent();
				Value *Cond = IB.CreateICmpUGE(GroupBytes[R.Leader], Clean);
				Instruction *Then =
				    SplitBlockAndInsertIfThen(Cond, R.I, false, Unlikely);
				Value *D = emitFull(R, Then, Bar, Clean, After, LC);
				Clean =
				    joinClean(R.I->getParent(), Head, Clean, Then->getParent(), D);
				continue;
			}
			Value *Own = nullptr;
			if (R.HasMembers) {
				// The group's blocks: the lowest address's, and the highest's,
				// which is the same or the next (Hi - Lo < 64). Two blocks
				// take one 16-bit load of the lowest's byte and the next
				// (the runtime mirrors byte 0 past the filter's end for the
				// last byte's next); a neighbour that is not the group's
				// only sends a member to its own precise test.
				IRBuilder<> IB(R.I);
				Value *A = IB.CreatePtrToInt(R.Addr, I64);
				Value *Lo = IB.CreateAdd(A, ConstantInt::get(I64, R.Lo));
				Value *G;
				if (R.Hi > R.Lo) {
					Value *Idx = IB.CreateAnd(IB.CreateLShr(Lo, FilterShift),
					                          FilterSize - 1);
					G = IB.CreateAlignedLoad(
					    I16, IB.CreateInBoundsGEP(I8, Filter, Idx), Align(1));
				} else {
					G = IB.CreateZExt(filterByte(IB, Lo), I16);
				}
				GroupBytes[J] = G;
				if (R.Lo == 0)
					Own = IB.CreateTrunc(G, I8);
			}
			Clean = emitFull(R, R.I, Bar, Clean, After, LC, Own);
		}
	}

	Module &M;
	LLVMContext &C;
	const DataLayout &DL;
	Type *I8, *I16, *I64;
	PointerType *Ptr;
	GlobalVariable *Fast, *Filter;
	FunctionCallee Slow, RangeClean;
	MDNode *Unlikely;
};

struct LomasPass : PassInfoMixin<LomasPass> {
	PreservedAnalyses run(Module &M, ModuleAnalysisManager &MAM)
	{
		auto &FAM = MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
		Instrumenter Ins(M);
		bool Changed = false;
		for (Function &F : M) {
			if (F.isDeclaration())
				continue;
			if (Ins.run(F, FAM.getResult<ScalarEvolutionAnalysis>(F),
			            FAM.getResult<LoopAnalysis>(F),
			            FAM.getResult<DominatorTreeAnalysis>(F)))
				FAM.invalidate(F, PreservedAnalyses::none()), Changed = true;
		}
		return Changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
	}
	static bool isRequired()
	{
		return true;
	}
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo()
{
	return {LLVM_PLUGIN_API_VERSION, "lomas-pass", "1", [](PassBuilder &PB) {
		        PB.registerOptimizerLastEPCallback([](ModulePassManager &MPM,
		                                              OptimizationLevel Level) {
			        MPM.addPass(LomasPass());
			        // At -O0 the program's own code stays as written.
			        if (Level == OptimizationLevel::O0)
				        return;
			        // The pass runs after the pipeline's own clean-ups: merge
			        // the versioned loops' entry checks' common parts and hoist
			        // what is invariant in the loops around them (the tiled
			        // workload's inner loop is entered 3.5M times; its check
			        // was a third of the instrumented program's own time).
			        FunctionPassManager FPM;
			        FPM.addPass(EarlyCSEPass(true));
			        FPM.addPass(createFunctionToLoopPassAdaptor(LICMPass(LICMOptions()),
			                                                    /*UseMemorySSA=*/true));
			        MPM.addPass(createModuleToFunctionPassAdaptor(std::move(FPM)));
		        });
	        }};
}
