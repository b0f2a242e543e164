import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { CronguardModule } from 'cronguard/nestjs';
import { ReportsService } from './reports.service.js';

@Module({
  imports: [
    // forRootAsync({ inject: [ConfigService], useFactory: (config) => ({ database: config.get('DATABASE_URL') }) })
    // reads it from @nestjs/config instead.
    CronguardModule.forRoot({
      database: process.env['DATABASE_URL'] ?? 'sqlite:./cronguard.sqlite',
      lockedBy: process.env['REPLICA_NAME'],
      migrate: true,
    }),
    ScheduleModule.forRoot(),
  ],
  providers: [ReportsService],
})
export class AppModule {}
