#!/usr/bin/env node
// The `cronguard` bin: the command line of this process, its output on its own stdout and stderr,
// and what the command answers as the exit code (see command-line.ts).
import { processIO } from './arguments.js';
import { runCommandLine } from './command-line.js';

process.exitCode = await runCommandLine(process.argv.slice(2), processIO);
