//go:build !weft_nopreinit

// The pre-initialisation half of sigaction.c. An executable's
// .preinit_array runs before the constructors of the shared libraries it
// loads; no shared object may carry one, so a program that links fabric
// into a c-shared library builds with the tag weft_nopreinit (and then
// starts with the default disposition for the signals those libraries
// took, and without the window below closed).
#include <signal.h>
#include <string.h>

extern int weft_sig_pre_taken;
extern struct sigaction weft_sig_pre[64];
extern sigset_t weft_sig_pre_mask;

// weft_sig_preinit records the dispositions the process started with and
// blocks the terminating signals until weft_sig_reset has undone what the
// libraries' constructors installed: one arriving meanwhile stays pending
// instead of reaching a library's handler.
static void weft_sig_preinit(int argc, char **argv, char **envp) {
	sigset_t block;
	(void)argc;
	(void)argv;
	(void)envp;
	for (int s = 1; s < 64 && s < NSIG; s++)
		if (s == SIGKILL || s == SIGSTOP || sigaction(s, NULL, &weft_sig_pre[s]) != 0)
			memset(&weft_sig_pre[s], 0, sizeof(weft_sig_pre[s])); // SIG_DFL
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &block, &weft_sig_pre_mask) == 0)
		weft_sig_pre_taken = 1;
}

__attribute__((section(".preinit_array"), used)) static void (*const weft_sig_preinit_entry)(int, char **, char **) = weft_sig_preinit;
