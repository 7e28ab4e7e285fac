# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_vloer_run_global_optspecs
    string join \n session forward-to= rewrite= parent-death child-pdeathsig= when-child-exits= stop-signal= stop-order= grace= kill-timeout= stop-on= timeout= scope= sweep= sweep-strict control= verdict= preserve-status success-exit= v/verbose q/quiet h/help V/version
end

function __fish_vloer_run_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_vloer_run_global_optspecs) -- $cmd 2>/dev/null
    or return 0 # vloer-run: an option still waits for its value
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_vloer_run_using_subcommand
    set -l cmd (__fish_vloer_run_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c vloer-run -n "__fish_vloer_run_needs_command" -l forward-to -d 'Where received signals are forwarded' -r -f -a "group\t'The child\'s whole process group'
child\t'The main child alone'"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l rewrite -d 'Forward TO instead of FROM, e.g. TERM:QUIT; TO = 0 drops FROM (repeatable, or comma-separated: TERM:QUIT,WINCH:0)' -r
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l child-pdeathsig -d 'Signal the main child gets from the kernel if vloer-run itself dies (0: none)' -r -f -a "0\t'no signal'
HUP\t'signal 1'
INT\t'signal 2'
QUIT\t'signal 3'
ILL\t'signal 4'
TRAP\t'signal 5'
ABRT\t'signal 6'
BUS\t'signal 7'
FPE\t'signal 8'
KILL\t'signal 9'
USR1\t'signal 10'
SEGV\t'signal 11'
USR2\t'signal 12'
PIPE\t'signal 13'
ALRM\t'signal 14'
TERM\t'signal 15'
STKFLT\t'signal 16'
CHLD\t'signal 17'
CONT\t'signal 18'
STOP\t'signal 19'
TSTP\t'signal 20'
TTIN\t'signal 21'
TTOU\t'signal 22'
URG\t'signal 23'
XCPU\t'signal 24'
XFSZ\t'signal 25'
VTALRM\t'signal 26'
PROF\t'signal 27'
WINCH\t'signal 28'
IO\t'signal 29'
PWR\t'signal 30'
SYS\t'signal 31'
RTMIN\t'signal 34'
RTMAX\t'signal 64'"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l when-child-exits -d 'What the child\'s exit does to the rest of the tree' -r -f -a "stop\t'Stop the rest of the tree at once'
wait\t'Wait for every descendant to exit on its own (still bounded by --timeout)'"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l stop-signal -d 'The signal a stop sends to every process in the scope (see --stop-order); SIGKILL follows after --grace' -r -f -a "HUP\t'signal 1'
INT\t'signal 2'
QUIT\t'signal 3'
ILL\t'signal 4'
TRAP\t'signal 5'
ABRT\t'signal 6'
BUS\t'signal 7'
FPE\t'signal 8'
KILL\t'signal 9'
USR1\t'signal 10'
SEGV\t'signal 11'
USR2\t'signal 12'
PIPE\t'signal 13'
ALRM\t'signal 14'
TERM\t'signal 15'
STKFLT\t'signal 16'
CHLD\t'signal 17'
CONT\t'signal 18'
STOP\t'signal 19'
TSTP\t'signal 20'
TTIN\t'signal 21'
TTOU\t'signal 22'
URG\t'signal 23'
XCPU\t'signal 24'
XFSZ\t'signal 25'
VTALRM\t'signal 26'
PROF\t'signal 27'
WINCH\t'signal 28'
IO\t'signal 29'
PWR\t'signal 30'
SYS\t'signal 31'
RTMIN\t'signal 34'
RTMAX\t'signal 64'"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l stop-order -d 'Who gets --stop-signal first: the child\'s group, then the rest once the child has exited (child), or the whole scope at once (all)' -r -f -a "child\t'The child\'s process group first; the rest of the scope once the child has exited'
all\t'Every process in the scope at once'"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l grace -d 'How long a stop waits after --stop-signal before SIGKILL; it moves on the moment the scope is empty. Keep it below docker stop\'s -t and terminationGracePeriodSeconds so the verdict is written' -r -f
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l kill-timeout -d 'How long SIGKILL rounds (each after a fresh scan) go on before the stop gives up and reports the survivors ("stopped":false, exit 125)' -r -f
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l stop-on -d 'Signals that, received by vloer-run, start a stop after being forwarded (repeatable, or comma-separated; giving any replaces the default TERM). Other signals are only forwarded' -r -f -a "HUP\t'signal 1'
INT\t'signal 2'
QUIT\t'signal 3'
ILL\t'signal 4'
TRAP\t'signal 5'
ABRT\t'signal 6'
BUS\t'signal 7'
FPE\t'signal 8'
KILL\t'signal 9'
USR1\t'signal 10'
SEGV\t'signal 11'
USR2\t'signal 12'
PIPE\t'signal 13'
ALRM\t'signal 14'
TERM\t'signal 15'
STKFLT\t'signal 16'
CHLD\t'signal 17'
CONT\t'signal 18'
STOP\t'signal 19'
TSTP\t'signal 20'
TTIN\t'signal 21'
TTOU\t'signal 22'
URG\t'signal 23'
XCPU\t'signal 24'
XFSZ\t'signal 25'
VTALRM\t'signal 26'
PROF\t'signal 27'
WINCH\t'signal 28'
IO\t'signal 29'
PWR\t'signal 30'
SYS\t'signal 31'
RTMIN\t'signal 34'
RTMAX\t'signal 64'"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l timeout -d 'Stop the run this long after the child started (0: never); exit 124' -r -f
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l scope -d 'Which processes the stop covers and checks' -r -f -a "tree\t'Every descendant of vloer-run, setsid() and daemonized ones included'
group\t'The run\'s processes in the child\'s process group (processes that leave it are neither signalled nor checked)'"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l sweep -d 'Also stop every process that holds or names DIR (working directory, root, executable, open file, memory map, argument), inside the tree or not, and prove none is left (repeatable)' -r -f -a "(__fish_complete_directories)"
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l control -d 'Serve stop, status and exec requests on a Unix socket at PATH (mode 0600)' -r -F
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l verdict -d 'Where the verdict goes: a file path, - (stdout), stderr, or off. A regular file is replaced atomically (a symlink\'s target, never the link); a FIFO, a device such as /dev/termination-log, or a descriptor (/dev/fd/N, /dev/stdout) gets one write' -r -F
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l success-exit -d 'Map this exit code of the child to 0 (repeatable), e.g. 143 for a JVM' -r
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l session -d 'Start the child in a new session (setsid) instead of a new process group; the terminal is then not handed to it'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l parent-death -d 'Stop the run (reason parent_died) when vloer-run\'s parent process exits'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l sweep-strict -d 'With --sweep: a process that could not be looked at fails the proof even when it started before the run'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -l preserve-status -d 'After --timeout, exit with the child\'s status instead of 124'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -s v -l verbose -d 'Print each forwarded signal, reap and stop step on stderr. On a pipe or socket, lines its reader is too slow for are left out and counted, never waited for'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -s q -l quiet -d 'Print nothing but errors; the verdict is still written where --verdict says (it is the run\'s output, not a message: --verdict off leaves it out)'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -s h -l help -d 'Print help (--help: with a longer description)'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -s V -l version -d 'Print the version'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -a "stop" -d 'Stop the run, wait for it, print its verdict; exit 0 when stopped is true, 1 when false'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -a "status" -d 'Print the run as JSON: vloer-run, the child, every live process, the running execs'
complete -c vloer-run -n "__fish_vloer_run_needs_command" -a "exec" -d 'Run COMMAND inside the run, as the instance\'s own child, with this terminal\'s stdio'
complete -c vloer-run -n "__fish_vloer_run_using_subcommand stop" -l control -d 'The instance\'s control socket' -r -F
complete -c vloer-run -n "__fish_vloer_run_using_subcommand stop" -l grace -d 'Use this grace period instead of the instance\'s own' -r
complete -c vloer-run -n "__fish_vloer_run_using_subcommand stop" -s h -l help -d 'Print help (--help: with a longer description)'
complete -c vloer-run -n "__fish_vloer_run_using_subcommand status" -l control -d 'The instance\'s control socket' -r -F
complete -c vloer-run -n "__fish_vloer_run_using_subcommand status" -s h -l help -d 'Print help (--help: with a longer description)'
complete -c vloer-run -n "__fish_vloer_run_using_subcommand exec" -l control -d 'The instance\'s control socket' -r -F
complete -c vloer-run -n "__fish_vloer_run_using_subcommand exec" -l timeout -d 'Stop the command after this long; exit 124' -r
complete -c vloer-run -n "__fish_vloer_run_using_subcommand exec" -s T -l no-tty -d 'Do not give the command a terminal of its own, even when stdin and stdout are one'
complete -c vloer-run -n "__fish_vloer_run_using_subcommand exec" -s h -l help -d 'Print help (--help: with a longer description)'
