import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

async function bootstrap(): Promise<void> {
  // No HTTP server: an application context runs the scheduled jobs.
  const app = await NestFactory.createApplicationContext(AppModule);
  // SIGTERM/SIGINT run onApplicationShutdown: the guard's shutdown lets runs in flight finish and release.
  app.enableShutdownHooks();
  process.send?.({ type: 'ready' });
}

void bootstrap();
