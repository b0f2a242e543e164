// cronguard/nestjs: the NestJS integration. Nothing here is loaded unless this subpath is imported;
// @nestjs/common and @nestjs/schedule are optional peer dependencies of cronguard.
export {
  CronguardModule,
  CRONGUARD_MODULE_OPTIONS,
  type CronguardModuleOptions,
  type CronguardModuleAsyncOptions,
} from './cronguard-module.js';
export { GuardedCron, type GuardedCronOptions } from './guarded-cron.js';
export { Guard } from '../guard/create-guard.js';
